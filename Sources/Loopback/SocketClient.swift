import CSystem
import Foundation
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// The one blocking HTTP client of the tests and thumbload: raw bytes to the daemon's Unix
/// socket or a loopback TCP port and back, read with the product's `ResponseHead`. A keep-alive
/// GET is `HTTPRoundTrip`'s (ThumbClient), on a connection from `connect`.
public enum SocketClient {
  /// Connects to a Unix socket (close-on-exec; a path too long for an address fails), or
  /// returns -1.
  public static func connect(_ path: String) -> Int32 {
    let fd = ts_connect_unix(path)
    return fd >= 0 ? fd : -1
  }

  /// Sends `bytes` and reads until the server closes the connection.
  public static func exchange(_ path: String, _ bytes: [UInt8]) -> [UInt8] {
    let fd = connect(path)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    sendAll(fd, bytes)
    return readToEnd(fd)
  }

  /// Writes all of `bytes` unless the connection fails; false if it did.
  @discardableResult
  public static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
      let n = bytes.withUnsafeBytes {
        send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
      }
      // Children of other tests exiting deliver SIGCHLD to this process: retry, don't stop.
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return false }
      offset += n
    }
    return true
  }

  /// Reads until the peer closes the connection.
  public static func readToEnd(_ fd: Int32) -> [UInt8] {
    CooperativePool.willBlock("SocketClient.readToEnd")
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = read(fd, &buffer, buffer.count)
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { break }
      out += buffer[0..<n]
    }
    return out
  }

  /// A GET with `Connection: close`; returns the status and the whole response text head.
  public static func get(_ path: String, _ target: String) -> (status: Int, response: [UInt8]) {
    let response = exchange(
      path, Array("GET \(target) HTTP/1.1\r\nHost: thumbd\r\nConnection: close\r\n\r\n".utf8))
    return (status(of: response), response)
  }

  /// Any request with `Connection: close` and extra header lines; the raw response.
  public static func request(
    _ path: String, _ method: String, _ target: String, headers: [String] = []
  ) -> [UInt8] {
    let extra = headers.map { $0 + "\r\n" }.joined()
    return exchange(
      path,
      Array(
        "\(method) \(target) HTTP/1.1\r\nHost: thumbd\r\n\(extra)Connection: close\r\n\r\n".utf8))
  }

  /// The body of a raw response (everything after the head).
  public static func body(of response: [UInt8]) -> [UInt8] {
    guard let end = response.firstRange(of: [13, 10, 13, 10]) else { return [] }
    return Array(response[end.upperBound...])
  }

  /// The head of a raw response, read by the product's own parser (`ResponseHead`, the one
  /// the fetcher reads origins with), so a malformed head fails the test that reads it; nil
  /// when there is no complete head or it does not parse.
  public static func head(of response: some Collection<UInt8>) -> ResponseHead? {
    let bytes = Array(response)
    guard let end = bytes.firstRange(of: [13, 10, 13, 10]) else { return nil }
    return try? ResponseHead(parsing: bytes[..<end.lowerBound])
  }

  /// The status of a raw response; 0 when it has no head that parses.
  public static func status(of response: [UInt8]) -> Int { head(of: response)?.status ?? 0 }

  /// Pipelined responses one after another in `bytes`, split by their `Content-Length`: each
  /// head and body. Stops at the first that is incomplete or does not parse.
  public static func responses(in bytes: [UInt8]) -> [(head: ResponseHead, body: [UInt8])] {
    var all: [(head: ResponseHead, body: [UInt8])] = []
    var rest = bytes[...]
    while let end = rest.firstRange(of: [13, 10, 13, 10]),
      let head = try? ResponseHead(parsing: rest[..<end.lowerBound])
    {
      let length = head.value("content-length").flatMap { Int($0) } ?? 0
      guard rest.distance(from: end.upperBound, to: rest.endIndex) >= length else { break }
      let bodyEnd = rest.index(end.upperBound, offsetBy: length)
      all.append((head, Array(rest[end.upperBound..<bodyEnd])))
      rest = rest[bodyEnd...]
    }
    return all
  }
}

extension SocketClient {
  /// A GET over TCP to 127.0.0.1 with `Connection: close` and extra header lines, from the
  /// loopback address `from` (127.0.0.1 when nil: 127.0.0.0/8 is all loopback, so tests can
  /// be several clients); the raw response, or [] if the connection failed.
  public static func getTCP(
    port: UInt16, _ target: String, method: String = "GET", headers: [String] = [],
    from: String? = nil
  ) -> [UInt8] {
    let fd = connectTCP(port: port, from: from)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    let extra = headers.map { $0 + "\r\n" }.joined()
    let request = Array(
      "\(method) \(target) HTTP/1.1\r\nHost: t\r\n\(extra)Connection: close\r\n\r\n".utf8)
    guard sendAll(fd, request) else { return [] }
    return readToEnd(fd)
  }

  /// Connects to 127.0.0.1:`port` from the loopback address `from` (any when nil), or
  /// returns -1.
  public static func connectTCP(port: UInt16, from: String? = nil) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return -1 }
    if let from {
      var local = sockaddr_in()
      local.sin_family = sa_family_t(AF_INET)
      let bound =
        inet_pton(AF_INET, from, &local.sin_addr) == 1
        && withUnsafePointer(to: &local) {
          $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
          }
        } == 0
      guard bound else {
        close(fd)
        return -1
      }
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 || (errno == EINTR && finishConnect(fd)) else {
      close(fd)
      return -1
    }
    return fd
  }

  /// A response header's value (case-insensitive name), from the raw response's head.
  public static func header(_ name: String, in response: [UInt8]) -> String? {
    head(of: response)?.value(name.lowercased())
  }

  /// A connect interrupted by a signal goes on in the background: wait for it to finish.
  private static func finishConnect(_ fd: Int32) -> Bool {
    var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    while poll(&poller, 1, -1) < 0 && errno == EINTR {}
    var error: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0
  }
}
