import CSystem
import Testing

@testable import ThumbServer

#if canImport(Glibc)
  import Glibc
#endif

/// A connection's unwritten output: chunks written in order across partial writes, and a
/// response's head and body as two chunks of one `sendmsg`.
@Suite("Output queue")
struct OutputQueueTests {
  @Test("partial writes of any size keep the bytes in order and the count exact")
  func partialWrites() {
    for step in 1...7 {
      var queue = OutputQueue()
      for chunk in ["abc", "", "defgh", "i", "jklmnopq"] { queue.append(Array(chunk.utf8)) }
      #expect(queue.count == 17)
      var written: [UInt8] = []
      var sawTwo = false
      while !queue.isEmpty {
        let before = queue.count
        let n = queue.write { first, second in
          if !second.isEmpty { sawTwo = true }
          let both = Array(first) + Array(second)
          let n = min(step, both.count)
          written += both[0..<n]
          return n
        }
        #expect(n > 0 && queue.count == before - n)
      }
      #expect(String(decoding: written, as: UTF8.self) == "abcdefghijklmnopq")
      #expect(sawTwo)
      #expect(
        queue.write { _, _ in
          Issue.record("nothing left to write")
          return 0
        } == 0)
    }
  }

  @Test("a failed write consumes nothing")
  func failedWrite() {
    var queue = OutputQueue()
    queue.append(Array("hello".utf8))
    #expect(queue.write { _, _ in -1 } == -1)
    #expect(queue.count == 5)
    queue.removeAll()
    #expect(queue.isEmpty)
  }

  @Test("head and body leave as one sendmsg, byte for byte what serialized gives")
  func sendsHeadAndBody() throws {
    let body = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let response = HTTPResponse(status: 200, headers: [("Content-Type", "image/jpeg")], body: body)
    let wire = response.wire(keepAlive: true)
    // A large body stays its own chunk; the head carries no byte of it.
    #expect(wire.body == body && wire.head.suffix(4) == [13, 10, 13, 10])
    var fds: [Int32] = [0, 0]
    #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
    defer { for fd in fds { close(fd) } }
    var queue = OutputQueue()
    queue.append(wire.head)
    queue.append(wire.body)
    let total = queue.count
    let sent = queue.write { first, second in
      ts_send_two(fds[0], first.baseAddress, first.count, second.baseAddress, second.count)
    }
    #expect(sent == total && queue.isEmpty)
    var received = [UInt8](repeating: 0, count: total + 1)
    var got = 0
    while got < total {
      let n = received.withUnsafeMutableBytes { read(fds[1], $0.baseAddress! + got, total - got) }
      guard n > 0 else { break }
      got += n
    }
    #expect(Array(received[0..<got]) == response.serialized(keepAlive: true))
  }

  @Test("small bodies ride in the head; HEAD keeps Content-Length and drops the body")
  func smallAndHead() {
    let response = HTTPResponse(status: 200, body: Array("tiny".utf8))
    let wire = response.wire(keepAlive: false)
    #expect(wire.body.isEmpty && wire.head == response.serialized(keepAlive: false))
    let big = HTTPResponse(status: 200, body: [UInt8](repeating: 1, count: 5000))
    let head = big.wire(keepAlive: true, headOnly: true)
    #expect(head.body.isEmpty)
    #expect(String(decoding: head.head, as: UTF8.self).contains("Content-Length: 5000\r\n"))
    #expect(head.head.suffix(4) == [13, 10, 13, 10])
  }
}
