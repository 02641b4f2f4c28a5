#if canImport(Glibc)
  import Glibc
#endif

/// What a test's end of a socket holds now, for tests that drive a server's handler by hand.
enum SocketBytes {
  /// Every byte written to the other end of `fd` so far and not read before, without waiting.
  static func unread(on fd: Int32) -> [UInt8] {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
      let n = buffer.withUnsafeMutableBytes {
        recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
      }
      guard n > 0 else { return bytes }
      bytes += buffer[0..<n]
    }
  }
}
