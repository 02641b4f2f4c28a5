import CSystem
import ThumbServer

#if canImport(Glibc)
  import Glibc
#endif

/// systemd socket activation: listening sockets passed as descriptors 3, 4, ... with
/// `LISTEN_PID` naming this process and `LISTEN_FDS` counting them.
enum SocketActivation {
  /// The passed listeners, or nil when the daemon was not socket-activated.
  static func listeners(environment: [String: String]) throws -> [Int32]? {
    guard let pid = environment["LISTEN_PID"].flatMap({ Int32($0) }), pid == getpid(),
      let count = environment["LISTEN_FDS"].flatMap({ Int32($0) }), count > 0
    else { return nil }
    // Children must not think the sockets are theirs.
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) }
    return try (0..<count).map { offset in
      let fd = 3 + offset
      let status = ts_adopt_listener(fd)
      guard status == 0 else { throw ServerError.system("adopt systemd socket \(fd)", -status) }
      return fd
    }
  }
}
