import CSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Ports for servers the tests start by number (nginx), which cannot be handed a listening
/// socket. A port the kernel picked and released can be picked again at once for another
/// test's listener or outgoing connection, and nginx would then fail to bind while requests
/// reach that other server. Ports below the ephemeral range are never picked by the kernel,
/// so one found free here stays free unless another such caller draws the same number.
enum TestPorts {
  /// A loopback TCP port below the kernel's ephemeral range that nothing listens on now.
  static func unused() -> UInt16 {
    while true {
      let port = UInt16.random(in: 20000..<32768)
      let listener = ts_listen_tcp("127.0.0.1", port, 1)
      if listener >= 0 {
        close(listener)
        return port
      }
    }
  }
}
