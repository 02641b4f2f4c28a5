/// An async semaphore whose waiters are served most urgent first (FIFO within a priority).
///
/// Waiters are chosen when a slot frees up, reading each waiter's priority at that moment, so
/// raising a queued job's priority reorders the queue without any bookkeeping. A waiter whose
/// task is cancelled leaves the queue and never starts.
actor PriorityLimiter {
  private struct Waiter {
    let id: UInt64
    let sequence: UInt64
    let priority: PriorityBox
    let continuation: CheckedContinuation<Bool, any Error>
  }

  /// Slots for visible and normal work. Prefetch slots do not count against it: a visible
  /// download never waits for a prefetch download, so at most `limit + prefetchLimit` run.
  let limit: Int
  /// Slots prefetch work may hold at once: three quarters (at least one). Prefetch takes a
  /// slot only while fewer than `limit` downloads of any kind run.
  let prefetchLimit: Int
  private(set) var active = 0
  private var activePrefetch = 0
  private var waiters: [Waiter] = []
  private var nextSequence: UInt64 = 0

  init(limit: Int) {
    self.limit = max(1, limit)
    prefetchLimit = max(1, self.limit * 3 / 4)
  }

  /// Jobs waiting for a slot.
  var queued: Int { waiters.count }

  /// Waits for a slot. Throws `CancellationError` if the task is cancelled while waiting.
  /// Returns whether the slot counts as a prefetch slot; pass that to `release`.
  @discardableResult
  func acquire(id: UInt64, priority: PriorityBox) async throws -> Bool {
    try Task.checkCancellation()
    // Waiters that could run would already have been given a slot, so any still waiting are
    // prefetch jobs held back by the prefetch share: they do not block this one.
    if eligible(priority.value) && mostUrgentEligibleWaiter() == nil {
      return grant(priority.value)
    }
    nextSequence += 1
    let sequence = nextSequence
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        waiters.append(
          Waiter(id: id, sequence: sequence, priority: priority, continuation: continuation))
      }
    } onCancel: {
      Task { await self.cancelWaiter(id: id) }
    }
  }

  /// Gives a slot back and hands free slots to the most urgent waiters that may have one.
  func release(prefetch: Bool) {
    active -= 1
    if prefetch { activePrefetch -= 1 }
    reconsider()
  }

  /// Hands free slots to waiters that may now have one: after a release, or after a waiting
  /// prefetch job was raised (a visible consumer joined it) and no longer counts against the
  /// prefetch share.
  func reconsider() {
    while let next = mostUrgentEligibleWaiter() {
      let waiter = waiters.remove(at: next)
      waiter.continuation.resume(returning: grant(waiter.priority.value))
    }
  }

  private func eligible(_ priority: ImagePriority) -> Bool {
    guard priority == .prefetch else { return active - activePrefetch < limit }
    return active < limit && activePrefetch < prefetchLimit
  }

  private func grant(_ priority: ImagePriority) -> Bool {
    active += 1
    let prefetch = priority == .prefetch
    if prefetch { activePrefetch += 1 }
    return prefetch
  }

  private func mostUrgentEligibleWaiter() -> Int? {
    var best: Int?
    var bestPriority = ImagePriority.prefetch
    for i in waiters.indices {
      let p = waiters[i].priority.value
      guard eligible(p) else { continue }
      if best == nil || p > bestPriority { (best, bestPriority) = (i, p) }
    }
    return best
  }

  private func cancelWaiter(id: UInt64) {
    guard let i = waiters.firstIndex(where: { $0.id == id }) else { return }
    waiters.remove(at: i).continuation.resume(throwing: CancellationError())
  }
}
