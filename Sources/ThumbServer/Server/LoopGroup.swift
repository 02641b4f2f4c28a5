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
  /// The loops, in the order they joined (weakly: the loops hold the group).
  private let members = Mutex<[WeakLoop]>([])
  /// New connections being handed from loop to loop (`EventLoop.adopt`), held open and
  /// counted nowhere else meanwhile.
  private let handoffs = Atomic<Int>(0)
  /// At most this many are in transit; a new connection past it is closed at once.
  static let maxHandoffs = 64

  private struct WeakLoop: @unchecked Sendable {
    // @unchecked: EventLoop is Sendable; the weak box only stops a retain cycle.
    weak var loop: EventLoop?
  }

  /// A group of `size` loops (at least 1).
  init(size: Int) { self.size = max(1, size) }

  /// `loop` is one of the group's loops (each joins as it is made).
  func join(_ loop: EventLoop) {
    members.withLock { $0.append(WeakLoop(loop: loop)) }
  }

  /// The loop after `loop` in the group, round the end; nil when it is alone.
  func loop(after loop: EventLoop) -> EventLoop? {
    members.withLock { members -> EventLoop? in
      guard let index = members.firstIndex(where: { $0.loop === loop }) else { return nil }
      for step in 1..<max(members.count, 1) {
        if let next = members[(index + step) % members.count].loop { return next }
      }
      return nil
    }
  }

  /// Whether one more connection may go in transit (counted until `endHandoff`).
  func beginHandoff() -> Bool {
    if handoffs.add(1, ordering: .relaxed).newValue <= Self.maxHandoffs { return true }
    handoffs.subtract(1, ordering: .relaxed)
    return false
  }

  /// A connection in transit was kept by a loop or closed.
  func endHandoff() { handoffs.subtract(1, ordering: .relaxed) }

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
