import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A real HTTP/1.1 origin on 127.0.0.1 for tests: one thread per connection, `Connection: close`.
/// It logs every request path and how many body bytes it managed to send.
final class TestOrigin: @unchecked Sendable {
  // @unchecked: mutable state is behind Mutexes; the socket is only closed in stop().
  struct Response: Sendable {
    var status = 200
    var headers: [String: String] = [:]
    var body: [UInt8] = []
    /// When set, the origin waits on this gate before sending anything.
    var holdUntilStopped = false
  }

  let port: UInt16
  private let listener: Int32
  private let handler: @Sendable (String) -> Response
  private let log = Mutex<[String]>([])
  private let sent = Mutex<[String: Int]>([:])
  private let stopped = Mutex(false)
  private let holdGate = DispatchSemaphore(value: 0)

  init(handler: @escaping @Sendable (String) -> Response) throws {
    self.handler = handler
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    self.listener = listener
    var yes: Int32 = 1
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard bound == 0, listen(listener, 256) == 0 else { throw POSIXError(.EADDRINUSE) }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        _ = getsockname(listener, $0, &length)
      }
    }
    port = UInt16(bigEndian: address.sin_port)
  }

  /// Starts serving; call once after init.
  func start() -> TestOrigin {
    Thread { [self] in acceptLoop() }.start()
    return self
  }

  /// `http://127.0.0.1:PORT` + path.
  func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

  /// Paths requested so far, in arrival order.
  var requests: [String] { log.withLock { $0 } }

  /// Body bytes successfully written for a path (summed over its requests).
  func bytesSent(for path: String) -> Int { sent.withLock { $0[path] ?? 0 } }

  /// Stops accepting and releases held responses.
  func stop() {
    stopped.withLock { $0 = true }
    shutdown(listener, Int32(SHUT_RDWR))
    close(listener)
    for _ in 0..<64 { holdGate.signal() }
  }

  private func acceptLoop() {
    while true {
      let connection = accept(listener, nil, nil)
      if connection < 0 {
        if stopped.withLock({ $0 }) { return }
        continue
      }
      var noSigpipe: Int32 = 1
      setsockopt(
        connection, SOL_SOCKET, SO_KEEPALIVE, &noSigpipe, socklen_t(MemoryLayout<Int32>.size))
      Thread { [self] in serve(connection) }.start()
    }
  }

  private func serve(_ connection: Int32) {
    defer { close(connection) }
    var head: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while !head.ends(with: [13, 10, 13, 10]) && head.count < 65536 {
      let n = read(connection, &buffer, buffer.count)
      if n <= 0 { return }
      head += buffer[0..<n]
    }
    let line = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self)
    let parts = line.split(separator: " ")
    guard parts.count >= 2 else { return }
    let path = String(parts[1])
    log.withLock { $0.append(path) }
    let response = handler(path)
    if response.holdUntilStopped {
      holdGate.wait()
      return
    }
    var text = "HTTP/1.1 \(response.status) Status\r\nConnection: close\r\n"
    text += "Content-Length: \(response.body.count)\r\n"
    for (name, value) in response.headers { text += "\(name): \(value)\r\n" }
    text += "\r\n"
    guard writeAll(connection, Array(text.utf8)) == text.utf8.count else { return }
    let written = writeAll(connection, response.body)
    sent.withLock { $0[path, default: 0] += written }
  }

  /// Writes in 64 KiB pieces; returns how many bytes went out before an error.
  private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int {
    var offset = 0
    while offset < bytes.count {
      let n = bytes.withUnsafeBytes {
        send(fd, $0.baseAddress! + offset, min(65536, bytes.count - offset), Int32(MSG_NOSIGNAL))
      }
      if n <= 0 { break }
      offset += n
    }
    return offset
  }
}

extension Array where Element == UInt8 {
  fileprivate func ends(with suffix: [UInt8]) -> Bool {
    count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
  }
}
