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
///
/// With a `ProcessMemory`, the process's own resident memory beyond its allowance takes room
/// from work (`Policy.workLimit`); a job is still refused only when it alone exceeds `limit`.
final class MemoryBudget: Sendable {
  /// The limit, in bytes.
  let limit: Int
  private let cache: (@Sendable () -> Int, @Sendable (Int) -> Void)?
  private let process: ProcessMemory?
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
    /// Whether it holds a source (a download, then the body its decodes read): it then fits
    /// only inside the sources' share (see `Policy`).
    let source: Bool
    /// Bytes of source the waiter keeps held while it waits (a decode's own source).
    let holding: Int
  }

  /// The bytes charged, and who goes next: the most urgent waiter, then the oldest, while it
  /// fits; whenever no unblocking one runs, the most urgent unblocking one that fits, else,
  /// once every source held waits for one of them, the most urgent unblocking one (see
  /// `reserve`).
  ///
  /// Sources (downloads, and the bodies they keep for their decodes) fit only inside
  /// `sourceLimit`, half the budget, unless no source is held:
  /// sources waiting for decodes can then never fill the budget, and the other half is there
  /// for their decodes. A download kept out by that share alone does not keep a decode behind
  /// it from starting, since a decode is what frees a source.
  struct Policy: WaitPolicy {
    let limit: Int
    /// What the process's own memory takes from the limit (`ProcessMemory`), at most half.
    var processExcess = 0
    /// The most resident memory that work and the cache did not explain, since the last
    /// fresh reading.
    var uncountedHigh = 0
    /// The room work has: the limit less what the process's own memory takes.
    var workLimit: Int { limit - processExcess }
    var sourceLimit: Int { workLimit / 2 }
    var charged = 0
    /// Of `charged`, what sources' holds charge.
    var sources = 0
    var peak = 0
    var refusals = 0
    var activityChanged = false
    /// Holds of jobs that unblock others (decodes), granted and not yet released.
    var runningUnblockers = 0

    mutating func next(
      _ waiters: WaiterList<Request>
    ) -> (id: UInt64, answer: Result<Void, any Error>)? {
      guard var next = waiters.best(by: { $0.entry.priority.value }) else { return nil }
      if !fits(next.entry) {
        let room = workLimit - charged
        // The most urgent unblocker that fits.
        let fitting = waiters.best {
          $0.entry.unblocks && $0.entry.bytes <= room ? $0.entry.priority.value : nil
        }
        if charged + next.entry.bytes <= workLimit, let fitting {
          // The head is a source kept out by the sources' share alone.
          next = fitting
        } else {
          guard runningUnblockers == 0 else { return nil }
          if let fitting {
            next = fitting
          } else {
            // None fits. Over the limit only when every source held waits for a decode that
            // does not fit: nothing else would free memory. While a source is held by
            // anything else (a download, a job reading its header), that ends first.
            let heldByWaiting = waiters.waiters.reduce(0) {
              $0 + ($1.entry.unblocks ? $1.entry.holding : 0)
            }
            guard heldByWaiting >= sources,
              let unblocker = waiters.best(by: {
                $0.entry.unblocks ? $0.entry.priority.value : nil
              })
            else { return nil }
            next = unblocker
          }
        }
      }
      charge(next.entry.bytes, source: next.entry.source)
      if next.entry.unblocks { runningUnblockers += 1 }
      return (next.id, .success(()))
    }

    /// Whether `request` fits now: in the budget, and a source in the sources' share too.
    /// With nothing charged, anything within `limit` fits (`reserve` refuses the rest), even
    /// when the process's own memory has narrowed the room.
    func fits(_ request: Request) -> Bool {
      charged == 0
        || (charged + request.bytes <= workLimit
          && (!request.source || sources == 0 || sources + request.bytes <= sourceLimit))
    }

    /// Takes a reading of the process's resident memory (`ProcessMemory`): `uncounted` is
    /// what work and the cache do not explain. A fresh reading replaces the high mark.
    mutating func process(uncounted: Int, allowance: Int, fresh: Bool) {
      uncountedHigh = fresh ? uncounted : max(uncountedHigh, uncounted)
      processExcess = min(limit / 2, max(0, uncountedHigh - allowance))
    }

    /// One that does not fit waits, unless it may be the unblocker that goes anyway.
    func mayGoAtOnce(_ request: Request) -> Bool {
      fits(request) || (request.unblocks && runningUnblockers == 0)
    }

    /// Whether work is idle now, if that changed since last asked; nil when it did not.
    mutating func takeActivityChange() -> Bool? {
      guard activityChanged else { return nil }
      activityChanged = false
      return charged == 0
    }

    mutating func charge(_ delta: Int, source: Bool) {
      let before = charged
      charged += delta
      if source { sources += delta }
      peak = max(peak, charged)
      if (before == 0) != (charged == 0) { activityChanged = true }
    }
  }

  /// A budget of `limit` bytes. `cacheBytes` reads the memory cache's size and `trimCache`
  /// shrinks it to at most the given bytes; without them the budget covers work alone.
  init(
    limit: Int, cacheBytes: (@Sendable () -> Int)? = nil,
    trimCache: (@Sendable (Int) -> Void)? = nil, process: ProcessMemory? = nil,
    onActivity: (@Sendable (_ isIdle: Bool) -> Void)? = nil
  ) {
    let limit = max(1, limit)
    self.limit = limit
    self.process = process
    self.onActivity = onActivity
    let cache: (@Sendable () -> Int, @Sendable (Int) -> Void)?
    if let cacheBytes, let trimCache { cache = (cacheBytes, trimCache) } else { cache = nil }
    self.cache = cache
    // Granted work may have grown into the cache's share; then the cache gives way.
    let box = WeakBox<MemoryBudget>()
    waiters = PriorityWaiters(Policy(limit: limit)) { box.value?.afterChange() }
    box.value = self
    measureProcess(fresh: true)
  }

  /// Reads the process's resident memory, if this budget counts it (`ProcessMemory`): when a
  /// decode ends, and afresh after an idle trim, when the allocator has given back what it
  /// kept (`fresh` drops the high mark).
  func measureProcess(fresh: Bool) {
    guard let reading = processReading() else { return }
    waiters.update { reading.apply(to: &$0, fresh: fresh) }
    trimCacheIfNeeded()
  }

  /// The process's resident bytes and the cache's, read outside the lock.
  private func processReading() -> ProcessReading? {
    guard let process else { return nil }
    let resident = process.resident()
    guard resident >= 0 else { return nil }
    return ProcessReading(
      resident: resident, cache: cache?.0() ?? 0, allowance: process.allowance)
  }

  private struct ProcessReading {
    let resident: Int
    let cache: Int
    let allowance: Int

    func apply(to policy: inout Policy, fresh: Bool) {
      policy.process(
        uncounted: resident - policy.charged - cache, allowance: allowance, fresh: fresh)
    }
  }

  /// The current figures.
  var snapshot: MemoryBudgetSnapshot {
    let cacheBytes = cache?.0() ?? 0
    let waiting = waiters.count
    let waits = waiters.waits
    return waiters.read {
      MemoryBudgetSnapshot(
        limit: limit, work: $0.charged, cache: cacheBytes, process: $0.processExcess,
        peakWork: $0.peak, waiting: waiting, waits: waits, refusals: $0.refusals)
    }
  }

  /// Waits until `bytes` fit, in priority order, and holds them until the returned hold is
  /// released (or deallocated). Throws `PipelineError.overBudget` when `bytes` alone exceed
  /// the limit, and `CancellationError` if the task is cancelled while waiting.
  ///
  /// `unblocks` marks a job whose end frees memory others hold while they wait for it: a
  /// decode, whose source's bytes go when it ends. Downloads that finished hold their bytes
  /// until their decodes run, so a budget full of sources could otherwise wait for itself for
  /// ever. Whenever no such job runs, the most urgent waiting one that fits starts (ahead of a
  /// head that does not fit); when none fits and every source held waits for one of them, the
  /// most urgent starts anyway: the budget is then exceeded by at most one decode's estimate,
  /// only when nothing else could free memory, and work always moves on.
  ///
  /// `source` marks a download's hold, which fits only inside the sources' share. `holding` is
  /// what the caller keeps held while it waits (a decode's own source). `growth` is what the
  /// process itself is expected to keep from the job (`MemoryEstimate.firstUse`): held with
  /// it, up to the whole limit, but never a reason to refuse it.
  func reserve(
    _ bytes: Int, priority: PriorityBox, unblocks: Bool = false, source: Bool = false,
    holding: Int = 0, growth: Int = 0
  ) async throws -> MemoryHold {
    var bytes = max(0, bytes)
    guard bytes <= limit else {
      waiters.update(admitting: false) { $0.refusals += 1 }
      throw PipelineError.overBudget(needed: bytes, limit: limit)
    }
    bytes = min(limit, bytes + max(0, growth))
    try Task.checkCancellation()
    try await waiters.wait(
      Request(
        bytes: bytes, priority: priority, unblocks: unblocks, source: source, holding: holding))
    return MemoryHold(budget: self, floor: bytes, unblocks: unblocks, source: source)
  }

  /// Holds `bytes` at once, without waiting and whatever the budget says: for bytes that are
  /// already in memory (a source read from the disk cache, a copy of a download's first bytes),
  /// counted as a source.
  func hold(_ bytes: Int) -> MemoryHold {
    report(
      waiters.update(admitting: false) { policy in
        policy.charge(max(0, bytes), source: true)
        return policy.takeActivityChange()
      })
    trimCacheIfNeeded()
    return MemoryHold(budget: self, floor: max(0, bytes), source: true)
  }

  /// A waiter's priority was raised: it may now be the head, and fit.
  func reconsider() {
    waiters.update { _ in }
  }

  /// Reservations already made; the hold's own accounting calls it (`endingUnblocker` when
  /// a decode's hold is released).
  fileprivate func adjust(by delta: Int, source: Bool, endingUnblocker: Bool = false) {
    guard delta != 0 || endingUnblocker else { return }
    // A decode has ended and freed what it used: the process's memory is read now, and
    // counted before anyone waiting is let in.
    let reading = endingUnblocker ? processReading() : nil
    // More bytes counted free nothing; fewer, or a decode ending, may let waiters in. The
    // change of activity is read in the same pass: once per chunk of a download.
    report(
      waiters.update(admitting: delta < 0 || endingUnblocker) { policy in
        policy.charge(delta, source: source)
        if endingUnblocker { policy.runningUnblockers -= 1 }
        reading?.apply(to: &policy, fresh: false)
        return policy.takeActivityChange()
      })
    if delta > 0 || reading != nil { trimCacheIfNeeded() }
  }

  /// Work grew into the cache's share: the cache gives way.
  func trimCacheIfNeeded() {
    guard let (cacheBytes, trim) = cache else { return }
    let room = waiters.read { $0.workLimit - $0.charged }
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
  private let source: Bool
  private let state: Mutex<(floor: Int, used: Int, released: Bool)>

  fileprivate init(
    budget: MemoryBudget, floor: Int, unblocks: Bool = false, source: Bool = false
  ) {
    self.budget = budget
    self.unblocks = unblocks
    self.source = source
    state = Mutex((floor, 0, false))
  }

  deinit { release() }

  /// Bytes this hold counts against the budget now.
  var bytes: Int { state.withLock { $0.released ? 0 : max($0.floor, $0.used) } }

  /// Adds `delta` (negative to give back) to the bytes counted, without waiting.
  func count(_ delta: Int) {
    budget.adjust(by: change { $0.used = max(0, $0.used + delta) }, source: source)
  }

  /// Holds at least `bytes` from now on: gives back the reserved floor, then waits, as
  /// `MemoryBudget.reserve` does, for all of `bytes` (a download whose body turned out larger
  /// than its first share). Holding nothing while it waits, downloads waiting for room can
  /// never hold, between them, the room each of them waits for.
  func widen(to bytes: Int, priority: PriorityBox) async throws {
    budget.adjust(by: change { $0.floor = 0 }, source: source)
    let more = try await budget.reserve(bytes, priority: priority, source: source)
    // `more`'s bytes become this hold's floor: charged once, under this hold.
    let moved = more.giveUp()
    budget.adjust(by: change { $0.floor = max($0.floor, moved) } - moved, source: source)
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
    budget.adjust(by: change { $0.floor = 0 }, source: source)
  }

  /// Gives everything back. Safe to call twice.
  func release() {
    var first = false
    let delta = change {
      first = true
      $0.released = true
    }
    budget.adjust(by: delta, source: source, endingUnblocker: first && unblocks)
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
  /// Bytes the process's own resident memory takes beyond its allowance (`ProcessMemory`);
  /// work has that much less room.
  public var process: Int
  /// The most work has held at once.
  public var peakWork: Int
  /// Jobs waiting for memory now.
  public var waiting: Int
  /// Jobs that had to wait, so far.
  public var waits: Int
  /// Jobs refused because they alone exceed the limit, so far.
  public var refusals: Int
}
