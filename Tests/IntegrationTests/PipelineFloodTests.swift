import CSystem
import Foundation
import Testing

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// 100,000 pipelined requests in one write, over each listener, for each kind of answer the
/// loop gives at once (health, 404, memory hit). A loop that answered each by calling back into
/// its handler from inside the write overflowed its stack about 5,600 requests in (SIGSEGV).
@Suite("Pipeline floods", .serialized, .onLane(.clients))
struct PipelineFloodTests {
  static let count = 100_000

  enum Listener: CaseIterable { case unix, tcp }

  /// The statuses of the answers as they arrive, in order, read as a stream: heads are
  /// gathered byte by byte, bodies skipped by their Content-Length in bulk (the client must
  /// cost little beside the daemon it measures). Stops at EOF or after `expected` answers.
  static func statuses(reading fd: Int32, expected: Int) -> [UInt16] {
    var statuses: [UInt16] = []
    statuses.reserveCapacity(expected)
    var head: [UInt8] = []
    head.reserveCapacity(1024)
    var buffer = [UInt8](repeating: 0, count: 1 << 18)
    var skip = 0
    while statuses.count < expected {
      let n = read(fd, &buffer, buffer.count)
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { break }
      buffer.withUnsafeBufferPointer { bytes in
        var at = 0
        while at < n {
          if skip > 0 {
            let taken = min(skip, n - at)
            skip -= taken
            at += taken
            continue
          }
          let byte = bytes[at]
          at += 1
          head.append(byte)
          let count = head.count
          guard byte == 10, count >= 4, head[count - 2] == 13, head[count - 3] == 10,
            head[count - 4] == 13
          else { continue }
          var status: UInt16 = 0
          for digit in head[9..<12] { status = status * 10 + UInt16(digit &- 48) }
          statuses.append(status)
          skip = Self.contentLength(head[...])
          head.removeAll(keepingCapacity: true)
        }
      }
    }
    return statuses
  }

  /// The Content-Length of a response head, read from its bytes (the daemon spells it so).
  static func contentLength(_ head: ArraySlice<UInt8>) -> Int {
    let name = Array("\r\nContent-Length: ".utf8)
    guard let field = head.firstRange(of: name) else { return 0 }
    var value = 0
    for byte in head[field.upperBound...] {
      guard byte >= 48 && byte <= 57 else { break }
      value = value * 10 + Int(byte - 48)
    }
    return value
  }

  /// Sends `requests` in one write from a thread of its own while this one reads; returns the
  /// statuses in the order they came.
  static func flood(_ daemon: TestDaemon, over listener: Listener, _ requests: [UInt8], count: Int)
    async throws -> [UInt16]
  {
    let fd: Int32
    switch listener {
    case .unix: fd = ts_connect_unix(daemon.socket)
    case .tcp:
      let port = try #require(SessionTests.tcpPort(in: daemon.log))
      fd = ts_connect_tcp("127.0.0.1", port)
    }
    #expect(fd >= 0, "connect: \(fd)")
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    // Both threads start now: a sender left to the cooperative pool once started more than
    // header_timeout late under CI's load, and the daemon rightly closed the silent connection.
    let sent = StartedThread { SocketClient.sendAll(fd, requests) }
    let statuses = try await offPool { Self.statuses(reading: fd, expected: count) }
    #expect(try await sent.value)
    return statuses
  }

  static func requests(_ targets: (Int) -> String, count: Int) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count * 48)
    for index in 0..<count {
      bytes += Array("GET \(targets(index)) HTTP/1.1\r\nHost: t\r\n\r\n".utf8)
    }
    return bytes
  }

  @Test(
    "100,000 pipelined health, 404 and memory-hit requests in one write, over the Unix socket and TCP: all answered, in order, and the daemon lives",
    arguments: Listener.allCases)
  func floods(listener: Listener) async throws {
    let root = TestDaemon.makeDirectory()
    let image = root + "/pictures/flood.png"
    try FileManager.default.createDirectory(
      atPath: root + "/pictures", withIntermediateDirectories: true)
    #expect(
      FileManager.default.createFile(atPath: image, contents: Data(Pictures.solid((9, 99, 199)))))
    // The release build when CI has built it after the tests: 600,000 requests take a debug
    // daemon about 45 s of CPU.
    let daemon = try await TestDaemon.start(
      ["--cache-dir", "", "--listen", "127.0.0.1:0", "--file-root", root + "/pictures"],
      binary: ChildProcess.thumbdFastest)
    defer { daemon.stop() }
    let url = ("file://" + image).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    let hit = "/v1/thumbnail?url=\(url)&w=8&h=8"
    // The first makes the memory entry; every later one is a hit answered on the loop.
    #expect(SocketClient.get(daemon.socket, hit).status == 200)
    // Every 1,000th request is of another kind, so the order of the answers shows.
    let kinds: [(String, (Int) -> String, UInt16, UInt16)] = [
      ("health", { $0 % 1000 == 999 ? "/nope" : "/healthz" }, 200, 404),
      ("404", { $0 % 1000 == 999 ? "/healthz" : "/nope/\($0)" }, 404, 200),
      ("memory hit", { $0 % 1000 == 999 ? "/nope" : hit }, 200, 404),
    ]
    for (name, target, usual, marker) in kinds {
      let statuses = try await Self.flood(
        daemon, over: listener, Self.requests(target, count: Self.count), count: Self.count)
      #expect(
        statuses.count == Self.count,
        "\(name): \(statuses.count) answers; the daemon's log ends: \(daemon.log.suffix(1500))")
      let wrong = statuses.indices.filter {
        statuses[$0] != ($0 % 1000 == 999 ? marker : usual)
      }
      #expect(wrong.isEmpty, "\(name): \(wrong.count) out of order, first at \(wrong.first ?? -1)")
      #expect(kill(daemon.pid, 0) == 0, "the daemon died during the \(name) flood")
      #expect(SocketClient.get(daemon.socket, "/healthz").status == 200)
    }
  }
}
