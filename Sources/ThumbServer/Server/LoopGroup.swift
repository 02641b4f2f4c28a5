import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// What the event loops of one server share: the counts that `ServerLimits` bound over the
/// whole server (open connections, unwritten output), and its listening sockets. Every loop
/// watches every listener (with `EPOLLEXCLUSIVE`, so a new connection wakes one loop) and
/// accepts into its own table; a listener is closed once the last loop has stopped watching
/// it, so no loop is left polling a closed (or reused) descriptor.
final class LoopGroup: Sendable {
  /// Loops in the server.
  let size: Int
  /// Open client connections over every loop.
  let connections = Atomic<Int>(0)
  /// Unwritten output over every loop's connections, bytes.
  let pendingOutput = Atomic<Int>(0)
  /// Each listener, and how many loops still watch it.
  private let watchers = Mutex<[Int32: Int]>([:])

  /// A group of `size` loops (at least 1).
  init(size: Int) { self.size = max(1, size) }

  /// Every loop is about to watch `fd`.
  func share(_ fd: Int32) {
    watchers.withLock { $0[fd] = size }
  }

  /// One loop has stopped watching `fd`; the last one closes it.
  func release(_ fd: Int32) {
    let last = watchers.withLock { watchers -> Bool in
      guard let count = watchers[fd] else { return true }
      if count <= 1 {
        watchers[fd] = nil
        return true
      }
      watchers[fd] = count - 1
      return false
    }
    if last { close(fd) }
  }
}
