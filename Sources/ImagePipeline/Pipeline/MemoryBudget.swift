import Synchronization

/// One budget for the memory the pipeline's work holds: source bytes in flight (counted as
/// they arrive), each decode's estimate (`MemoryEstimate`, from the header) while it runs,
/// and the memory cache.
///
/// Work asks for its bytes before it starts (`reserve`) and waits while they do not fit,
/// most urgent first, then oldest; the head of the queue is never overtaken by smaller work
/// behind it, so a large visible decode cannot be starved by a stream of small prefetches.
/// A single job larger than the whole budget fails at once (`PipelineError.overBudget`)
/// instead of waiting for ever. The memory cache is the part that gives way: whenever work
/// needs room, the cache is trimmed (least recently used first) so that work plus cache stay
/// inside the limit.
///
/// Downloads cannot wait in the middle of a body, so what arrives beyond a download's
/// reservation is counted without waiting (`MemoryHold.count`); new work then waits until it
/// drains. The overshoot is bounded by the fetch slots times the source byte cap.
final class MemoryBudget: Sendable {
  /// The limit, in bytes.
  let limit: Int
  private let cache: (@Sendable () -> Int, @Sendable (Int) -> Void)?
  private let state = Mutex(State())
  /// Told when work goes from nothing to something, and back (`isIdle` then true).
  private let onActivity: (@Sendable (_ isIdle: Bool) -> Void)?

  private struct Waiter {
    let id: UInt64
    let bytes: Int
    let priority: PriorityBox
    let sequence: UInt64
    /// Whether the job gives back memory others are waiting on when it ends (a decode, whose
    /// end frees its source's bytes).
    let unblocks: Bool
    let continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var charged = 0
    var peak = 0
    var waiters: [Waiter] = []
    var sequence: UInt64 = 0
    var nextID: UInt64 = 0
    var waits = 0
    var refusals = 0
    var activityChanged = false
    /// Holds of jobs that unblock others (decodes), granted and not yet released.
    var runningUnblockers = 0
  }

  /// A budget of `limit` bytes. `cacheBytes` reads the memory cache's size and `trimCache`
  /// shrinks it to at most the given bytes; without them the budget covers work alone.
  init(
    limit: Int, cacheBytes: (@Sendable () -> Int)? = nil,
    trimCache: (@Sendable (Int) -> Void)? = nil,
    onActivity: (@Sendable (_ isIdle: Bool) -> Void)? = nil
  ) {
    self.limit = max(1, limit)
    self.onActivity = onActivity
    if let cacheBytes, let trimCache { cache = (cacheBytes, trimCache) } else { cache = nil }
  }

  /// The current figures.
  var snapshot: MemoryBudgetSnapshot {
    let cacheBytes = cache?.0() ?? 0
    return state.withLock {
      MemoryBudgetSnapshot(
        limit: limit, work: $0.charged, cache: cacheBytes, peakWork: $0.peak,
        waiting: $0.waiters.count, waits: $0.waits, refusals: $0.refusals)
    }
  }

  /// Waits until `bytes` fit, in priority order, and holds them until the returned hold is
  /// released (or deallocated). Throws `PipelineError.overBudget` when `bytes` alone exceed
  /// the limit, and `CancellationError` if the task is cancelled while waiting.
  ///
  /// `unblocks` marks a job whose end frees memory others hold while they wait for it: a
  /// decode, whose source's bytes go when it ends. Downloads that finished hold their bytes
  /// until their decodes run, so a budget full of sources could otherwise wait for itself for
  /// ever. Whenever no such job runs, the most urgent waiting one starts even if it does not
  /// fit (and ahead of a head that does not fit either): the budget is then exceeded by at
  /// most one decode's estimate, and work always moves on.
  func reserve(_ bytes: Int, priority: PriorityBox, unblocks: Bool = false) async throws
    -> MemoryHold
  {
    let bytes = max(0, bytes)
    guard bytes <= limit else {
      state.withLock { $0.refusals += 1 }
      throw PipelineError.overBudget(needed: bytes, limit: limit)
    }
    try Task.checkCancellation()
    let id = state.withLock { state -> UInt64 in
      state.nextID += 1
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        // Cancelled before the handler was installed: its onCancel has already run.
        if Task.isCancelled {
          continuation.resume(throwing: CancellationError())
          return
        }
        let granted = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
          state.sequence += 1
          state.waiters.append(
            Waiter(
              id: id, bytes: bytes, priority: priority, sequence: state.sequence,
              unblocks: unblocks, continuation: continuation))
          let granted = Self.grant(&state, limit: limit)
          if state.waiters.contains(where: { $0.id == id }) { state.waits += 1 }
          return granted
        }
        finish(granted)
      }
    } onCancel: {
      let removed = state.withLock { state -> Waiter? in
        guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return state.waiters.remove(at: index)
      }
      removed?.continuation.resume(throwing: CancellationError())
      // A head that leaves may let the ones behind it in.
      finish(state.withLock { Self.grant(&$0, limit: limit) })
    }
    return MemoryHold(budget: self, floor: bytes, unblocks: unblocks)
  }

  /// Holds `bytes` at once, without waiting and whatever the budget says: for bytes that are
  /// already in memory (a source read from the disk cache).
  func hold(_ bytes: Int) -> MemoryHold {
    state.withLock { Self.charge(&$0, max(0, bytes)) }
    reportActivity()
    trimCacheIfNeeded()
    return MemoryHold(budget: self, floor: max(0, bytes))
  }

  /// A waiter's priority was raised: it may now be the head, and fit.
  func reconsider() {
    finish(state.withLock { Self.grant(&$0, limit: limit) })
  }

  /// Reservations already made; the hold's own accounting calls it (`endingUnblocker` when
  /// a decode's hold is released).
  fileprivate func adjust(by delta: Int, endingUnblocker: Bool = false) {
    guard delta != 0 || endingUnblocker else { return }
    let granted = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
      Self.charge(&state, delta)
      if endingUnblocker { state.runningUnblockers -= 1 }
      return delta < 0 || endingUnblocker ? Self.grant(&state, limit: limit) : []
    }
    if delta > 0 { trimCacheIfNeeded() }
    finish(granted)
  }

  /// Work grew into the cache's share: the cache gives way.
  func trimCacheIfNeeded() {
    guard let (cacheBytes, trim) = cache else { return }
    let room = limit - state.withLock { $0.charged }
    if cacheBytes() > max(0, room) { trim(max(0, room)) }
  }

  private static func charge(_ state: inout State, _ delta: Int) {
    let before = state.charged
    state.charged += delta
    state.peak = max(state.peak, state.charged)
    if (before == 0) != (state.charged == 0) { state.activityChanged = true }
  }

  /// Tells the listener if work went from nothing to something or back, outside the lock.
  private func reportActivity() {
    guard let onActivity else { return }
    let idle = state.withLock { state -> Bool? in
      guard state.activityChanged else { return nil }
      state.activityChanged = false
      return state.charged == 0
    }
    if let idle { onActivity(idle) }
  }

  /// Whether no work holds any memory now.
  var isIdle: Bool { state.withLock { $0.charged == 0 } }

  /// Grants waiters from the most urgent while the next one fits, and the most urgent
  /// unblocking one whenever none runs (see `reserve`). Called with the lock held; returns
  /// the continuations to resume once it is released.
  private static func grant(_ state: inout State, limit: Int) -> [CheckedContinuation<
    Void, any Error
  >] {
    var granted: [CheckedContinuation<Void, any Error>] = []
    while let head = mostUrgent(state.waiters) {
      var next = head
      if state.charged + state.waiters[head].bytes > limit {
        guard state.runningUnblockers == 0,
          let unblocker = mostUrgent(state.waiters, where: { $0.unblocks })
        else { break }
        next = unblocker
      }
      let waiter = state.waiters.remove(at: next)
      charge(&state, waiter.bytes)
      if waiter.unblocks { state.runningUnblockers += 1 }
      granted.append(waiter.continuation)
    }
    return granted
  }

  private static func mostUrgent(
    _ waiters: [Waiter], where included: (Waiter) -> Bool = { _ in true }
  ) -> Int? {
    var best: Int?
    for i in waiters.indices where included(waiters[i]) {
      guard let current = best else {
        best = i
        continue
      }
      let candidate = waiters[i].priority.value
      let leader = waiters[current].priority.value
      if candidate > leader
        || (candidate == leader && waiters[i].sequence < waiters[current].sequence)
      {
        best = i
      }
    }
    return best
  }

  private func finish(_ granted: [CheckedContinuation<Void, any Error>]) {
    reportActivity()
    if !granted.isEmpty { trimCacheIfNeeded() }
    for continuation in granted { continuation.resume() }
  }
}

/// Memory held against a `MemoryBudget`: at least the reserved floor, or what was counted
/// (a download's bytes as they arrive), whichever is more, until `release` or deallocation.
final class MemoryHold: Sendable {
  private let budget: MemoryBudget
  private let unblocks: Bool
  private let state: Mutex<(floor: Int, used: Int, released: Bool)>

  fileprivate init(budget: MemoryBudget, floor: Int, unblocks: Bool = false) {
    self.budget = budget
    self.unblocks = unblocks
    state = Mutex((floor, 0, false))
  }

  deinit { release() }

  /// Bytes this hold counts against the budget now.
  var bytes: Int { state.withLock { $0.released ? 0 : max($0.floor, $0.used) } }

  /// Adds `delta` (negative to give back) to the bytes counted, without waiting.
  func count(_ delta: Int) {
    budget.adjust(by: change { $0.used = max(0, $0.used + delta) })
  }

  /// Drops the reserved floor: from now on the hold counts only what was counted (a finished
  /// download, which holds its body and nothing more).
  func settle() {
    budget.adjust(by: change { $0.floor = 0 })
  }

  /// Gives everything back. Safe to call twice.
  func release() {
    var first = false
    let delta = change {
      first = true
      $0.released = true
    }
    budget.adjust(by: delta, endingUnblocker: first && unblocks)
  }

  /// Applies `update` and returns how much the charged bytes changed.
  private func change(_ update: (inout (floor: Int, used: Int, released: Bool)) -> Void) -> Int {
    state.withLock { hold in
      guard !hold.released else { return 0 }
      let before = max(hold.floor, hold.used)
      update(&hold)
      let after = hold.released ? 0 : max(hold.floor, hold.used)
      return after - before
    }
  }
}

/// What the pipeline's memory budget looks like at one moment (`ThumbnailPipeline.memoryBudget`).
public struct MemoryBudgetSnapshot: Sendable, Hashable {
  /// The limit.
  public var limit: Int
  /// Bytes held by work (reservations and counted source bytes).
  public var work: Int
  /// Bytes of the memory cache.
  public var cache: Int
  /// The most work has held at once.
  public var peakWork: Int
  /// Jobs waiting for memory now.
  public var waiting: Int
  /// Jobs that had to wait, so far.
  public var waits: Int
  /// Jobs refused because they alone exceed the limit, so far.
  public var refusals: Int
}
