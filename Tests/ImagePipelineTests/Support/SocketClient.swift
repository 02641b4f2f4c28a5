import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A blocking test client for the daemon's Unix socket.
enum SocketClient {
  /// Connects, or returns -1.
  static func connect(_ path: String) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
    }
    let status = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    if status != 0 {
      close(fd)
      return -1
    }
    return fd
  }

  /// Sends `bytes` and reads until the server closes the connection.
  static func exchange(_ path: String, _ bytes: [UInt8]) -> [UInt8] {
    let fd = connect(path)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var offset = 0
    while offset < bytes.count {
      let n = bytes.withUnsafeBytes {
        send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
      }
      if n <= 0 { break }
      offset += n
    }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = read(fd, &buffer, buffer.count)
      if n <= 0 { break }
      out += buffer[0..<n]
    }
    return out
  }

  /// A GET with `Connection: close`; returns the status and the whole response text head.
  static func get(_ path: String, _ target: String) -> (status: Int, response: [UInt8]) {
    let response = exchange(
      path, Array("GET \(target) HTTP/1.1\r\nHost: thumbd\r\nConnection: close\r\n\r\n".utf8))
    return (status(of: response), response)
  }

  static func status(of response: [UInt8]) -> Int {
    let line = String(decoding: response.prefix(12), as: UTF8.self)
    return Int(line.dropFirst(9).prefix(3)) ?? 0
  }
}
