import CSystem
import Synchronization

/// Gives the allocator's free memory back to the kernel once work has stopped for a while.
///
/// glibc keeps freed heap memory in its arenas (one per thread that allocates, up to eight per
/// core), so after a burst of decodes the daemon's RSS stays at the burst's height although
/// nothing is in use. `malloc_trim` returns it; it walks every arena, so it runs only when the
/// memory budget's work has been at zero for `delay` seconds, once per idle period, never
/// while anything decodes. Measured in docs/BENCHMARKS.md ("Soak").
final class AllocatorTrim: Sendable {
  private let delay: Double
  /// Bumped whenever work starts or ends; a trim scheduled under an older value gives up.
  private let generation = Atomic<UInt64>(0)
  private let trims = Atomic<Int>(0)

  /// Trims `delay` seconds after work ends; 0 never trims.
  init(delay: Double) { self.delay = delay }

  /// Trims done so far.
  var count: Int { trims.load(ordering: .relaxed) }

  /// Work was taken up again: a pending trim is off.
  func workStarted() { generation.add(1, ordering: .relaxed) }

  /// Work has dropped to nothing: trim after the delay unless work comes back first, then
  /// call `trimmed` (the budget reads the process's memory afresh).
  func workEnded(
    stillIdle: @escaping @Sendable () -> Bool, trimmed: @escaping @Sendable () -> Void = {}
  ) {
    guard delay > 0 else { return }
    let mine = generation.add(1, ordering: .relaxed).newValue
    Task.detached(priority: .background) { [self] in
      try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
      guard generation.load(ordering: .relaxed) == mine, stillIdle() else { return }
      _ = ts_malloc_trim()
      trims.add(1, ordering: .relaxed)
      trimmed()
    }
  }
}
