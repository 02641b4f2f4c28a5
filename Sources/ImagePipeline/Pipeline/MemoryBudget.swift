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
/// A download whose body is larger than its reservation, and whose size is known before the
/// body is taken (a file, a `Content-Length`), waits for room for the whole body first
/// (`MemoryHold.widen`). Downloads cannot wait in the middle of a body, so a body of unknown
/// size (chunked) that outgrows its reservation is counted without waiting
/// (`MemoryHold.count`); new work then waits until it drains. That overshoot is bounded by the
/// fetch slots times the source byte cap.
final class MemoryBudget: Sendable {
  /// The limit, in bytes.
  let limit: Int
  private let cache: (@Sendable () -> Int, @Sendable (Int) -> Void)?
  private let waiters: PriorityWaiters<Policy>
  /// Told when work goes from nothing to something, and back (`isIdle` then true).
  private let onActivity: (@Sendable (_ isIdle: Bool) -> Void)?

  /// What a waiter asks for.
  struct Request: Sendable {
    let bytes: Int
    let priority: PriorityBox
    /// Whether the job gives back memory others are waiting on when it ends (a decode, whose
    /// end frees its source's bytes).
    let unblocks: Bool
  }

  /// The bytes charged, and who goes next: the most urgent waiter, then the oldest, while it
  /// fits; whenever no unblocking one runs, the most urgent unblocking one that fits, else the
  /// most urgent unblocking one (see `reserve`).
  struct Policy: WaitPolicy {
    let limit: Int
    var charged = 0
    var peak = 0
    var refusals = 0
    var activityChanged = false
    /// Holds of jobs that unblock others (decodes), granted and not yet released.
    var runningUnblockers = 0

    mutating func next(
      _ waiters: WaiterList<Request>
    ) -> (id: UInt64, answer: Result<Void, any Error>)? {
      guard var next = waiters.best(by: { $0.entry.priority.value }) else { return nil }
      if charged + next.entry.bytes > limit {
        guard runningUnblockers == 0 else { return nil }
        // The most urgent unblocker that fits; only when none does, the most urgent one over
        // the limit.
        let room = limit - charged
        let fitting = waiters.best {
          $0.entry.unblocks && $0.entry.bytes <= room ? $0.entry.priority.value : nil
        }
        guard
          let unblocker = fitting
            ?? waiters.best(by: { $0.entry.unblocks ? $0.entry.priority.value : nil })
        else { return nil }
        next = unblocker
      }
      charge(next.entry.bytes)
      if next.entry.unblocks { runningUnblockers += 1 }
      return (next.id, .success(()))
    }

    /// One that does not fit waits, unless it may be the unblocker that goes anyway.
    func mayGoAtOnce(_ request: Request) -> Bool {
      charged + request.bytes <= limit || (request.unblocks && runningUnblockers == 0)
    }

    /// Whether work is idle now, if that changed since last asked; nil when it did not.
    mutating func takeActivityChange() -> Bool? {
      guard activityChanged else { return nil }
      activityChanged = false
      return charged == 0
    }

    mutating func charge(_ delta: Int) {
      let before = charged
      charged += delta
      peak = max(peak, charged)
      if (before == 0) != (charged == 0) { activityChanged = true }
    }
  }

  /// A budget of `limit` bytes. `cacheBytes` reads the memory cache's size and `trimCache`
  /// shrinks it to at most the given bytes; without them the budget covers work alone.
  init(
    limit: Int, cacheBytes: (@Sendable () -> Int)? = nil,
    trimCache: (@Sendable (Int) -> Void)? = nil,
    onActivity: (@Sendable (_ isIdle: Bool) -> Void)? = nil
  ) {
    let limit = max(1, limit)
    self.limit = limit
    self.onActivity = onActivity
    let cache: (@Sendable () -> Int, @Sendable (Int) -> Void)?
    if let cacheBytes, let trimCache { cache = (cacheBytes, trimCache) } else { cache = nil }
    self.cache = cache
    // Granted work may have grown into the cache's share; then the cache gives way.
    let box = WeakBox<MemoryBudget>()
    waiters = PriorityWaiters(Policy(limit: limit)) { box.value?.afterChange() }
    box.value = self
  }

  /// The current figures.
  var snapshot: MemoryBudgetSnapshot {
    let cacheBytes = cache?.0() ?? 0
    let waiting = waiters.count
    let waits = waiters.waits
    return waiters.read {
      MemoryBudgetSnapshot(
        limit: limit, work: $0.charged, cache: cacheBytes, peakWork: $0.peak,
        waiting: waiting, waits: waits, refusals: $0.refusals)
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
      waiters.update(admitting: false) { $0.refusals += 1 }
      throw PipelineError.overBudget(needed: bytes, limit: limit)
    }
    try Task.checkCancellation()
    try await waiters.wait(Request(bytes: bytes, priority: priority, unblocks: unblocks))
    return MemoryHold(budget: self, floor: bytes, unblocks: unblocks)
  }

  /// Holds `bytes` at once, without waiting and whatever the budget says: for bytes that are
  /// already in memory (a source read from the disk cache).
  func hold(_ bytes: Int) -> MemoryHold {
    report(
      waiters.update(admitting: false) { policy in
        policy.charge(max(0, bytes))
        return policy.takeActivityChange()
      })
    trimCacheIfNeeded()
    return MemoryHold(budget: self, floor: max(0, bytes))
  }

  /// A waiter's priority was raised: it may now be the head, and fit.
  func reconsider() {
    waiters.update { _ in }
  }

  /// Reservations already made; the hold's own accounting calls it (`endingUnblocker` when
  /// a decode's hold is released).
  fileprivate func adjust(by delta: Int, endingUnblocker: Bool = false) {
    guard delta != 0 || endingUnblocker else { return }
    // More bytes counted free nothing; fewer, or a decode ending, may let waiters in. The
    // change of activity is read in the same pass: once per chunk of a download.
    report(
      waiters.update(admitting: delta < 0 || endingUnblocker) { policy in
        policy.charge(delta)
        if endingUnblocker { policy.runningUnblockers -= 1 }
        return policy.takeActivityChange()
      })
    if delta > 0 { trimCacheIfNeeded() }
  }

  /// Work grew into the cache's share: the cache gives way.
  func trimCacheIfNeeded() {
    guard let (cacheBytes, trim) = cache else { return }
    let room = limit - waiters.read { $0.charged }
    if cacheBytes() > max(0, room) { trim(max(0, room)) }
  }

  private func afterChange() {
    reportActivity()
    trimCacheIfNeeded()
  }

  /// Tells the listener if work went from nothing to something or back, outside the lock.
  private func reportActivity() {
    report(waiters.update(admitting: false) { $0.takeActivityChange() })
  }

  /// Tells the listener a change `takeActivityChange` found (nil: none).
  private func report(_ idle: Bool?) {
    if let idle { onActivity?(idle) }
  }

  /// Whether no work holds any memory now.
  var isIdle: Bool { waiters.read { $0.charged == 0 } }
}

/// A reference that does not keep its object alive, for a callback the object itself owns.
final class WeakBox<Object: AnyObject & Sendable>: @unchecked Sendable {
  // @unchecked: `value` is set once, during the owner's initialiser, before any callback.
  weak var value: Object?
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

  /// Holds at least `bytes` from now on: gives back the reserved floor, then waits, as
  /// `MemoryBudget.reserve` does, for all of `bytes` (a download whose body turned out larger
  /// than its first share). Holding nothing while it waits, downloads waiting for room can
  /// never hold, between them, the room each of them waits for.
  func widen(to bytes: Int, priority: PriorityBox) async throws {
    budget.adjust(by: change { $0.floor = 0 })
    let more = try await budget.reserve(bytes, priority: priority)
    // `more`'s bytes become this hold's floor: charged once, under this hold.
    let moved = more.giveUp()
    budget.adjust(by: change { $0.floor = max($0.floor, moved) } - moved)
  }

  /// Marks the hold released without giving its bytes back to the budget, and returns them:
  /// for another hold to take over.
  private func giveUp() -> Int {
    state.withLock { hold in
      guard !hold.released else { return 0 }
      hold.released = true
      return max(hold.floor, hold.used)
    }
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
