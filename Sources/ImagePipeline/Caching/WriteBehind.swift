import Synchronization

/// Cache writes that run after the result they store was delivered, bounded in number.
///
/// A reply should never wait for a disk. Writes beyond `limit` pending are skipped rather than
/// queued: a cache may always forget, and a slow disk must not turn into unbounded memory.
final class WriteBehind: Sendable {
  private struct State {
    var pending = 0
    var flushWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    var nextWaiter: UInt64 = 0
  }

  let limit: Int
  private let state = Mutex(State())

  init(limit: Int) { self.limit = max(1, limit) }

  /// Starts `write` unless `limit` writes are pending; returns whether it started.
  func schedule(_ write: @escaping @Sendable () async -> Void) -> Bool {
    let started = state.withLock { state in
      guard state.pending < limit else { return false }
      state.pending += 1
      return true
    }
    guard started else { return false }
    Task {
      await write()
      let waiters = state.withLock { state in
        state.pending -= 1
        guard state.pending == 0 else { return [CheckedContinuation<Void, Never>]() }
        defer { state.flushWaiters.removeAll() }
        return Array(state.flushWaiters.values)
      }
      for waiter in waiters { waiter.resume() }
    }
    return true
  }

  /// Returns once no write is pending, or when the calling task is cancelled.
  func flush() async {
    let id = state.withLock { state in
      state.nextWaiter += 1
      return state.nextWaiter
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let now = state.withLock { state in
          if state.pending == 0 || Task.isCancelled { return true }
          state.flushWaiters[id] = continuation
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      state.withLock { $0.flushWaiters.removeValue(forKey: id) }?.resume()
    }
  }
}
