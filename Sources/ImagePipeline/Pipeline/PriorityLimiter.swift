/// Download slots: an async semaphore whose waiters are served most urgent first, shared
/// fairly between clients and bounded per origin.
///
/// Waiters are chosen when a slot frees up, reading each waiter's priority at that moment, so
/// raising a queued job's priority reorders the queue without any bookkeeping. Among equally
/// urgent waiters, the client holding the fewest slots goes first (max-min fairness), then
/// the oldest request. Two caps keep one client or one origin from taking everything: a
/// client holds at most `clientLimit` of the visible and normal slots, so another client's
/// request always finds one free; and at most `originLimit` downloads run per origin, so an
/// origin that never answers cannot hold slots another origin needs. A waiter whose task is
/// cancelled leaves the queue and never starts.
actor PriorityLimiter {
  private struct Waiter {
    let id: UInt64
    let sequence: UInt64
    let priority: PriorityBox
    let client: ClientID
    let origin: String
    let continuation: CheckedContinuation<Grant, any Error>
  }

  /// A slot held; give it back with `release`.
  struct Grant: Sendable, Hashable {
    /// Whether it counts against the prefetch share.
    let prefetch: Bool
    let client: ClientID
    let origin: String
  }

  /// Slots for visible and normal work. Prefetch slots do not count against it: a visible
  /// download never waits for a prefetch download, so at most `limit + prefetchLimit` run.
  let limit: Int
  /// Slots prefetch work may hold at once: three quarters (at least one). Prefetch takes a
  /// slot only while fewer than `limit` downloads of any kind run.
  let prefetchLimit: Int
  /// Visible and normal slots one client may hold: all but a quarter (at least one left for
  /// others when `limit` > 1).
  let clientLimit: Int
  /// Downloads from one origin (`host:port`) at once, of any priority.
  let originLimit: Int
  private(set) var active = 0
  private var activePrefetch = 0
  private var byClient: [ClientID: Int] = [:]
  private var byOrigin: [String: Int] = [:]
  private var waiters: [Waiter] = []
  private var nextSequence: UInt64 = 0

  init(limit: Int, originLimit: Int = .max) {
    self.limit = max(1, limit)
    prefetchLimit = max(1, self.limit * 3 / 4)
    clientLimit = max(1, self.limit - max(1, self.limit / 4))
    self.originLimit = max(1, originLimit)
  }

  /// Jobs waiting for a slot.
  var queued: Int { waiters.count }

  /// Waits for a slot for `client`'s download from `origin` ("" for none, such as files).
  /// Throws `CancellationError` if the task is cancelled while waiting.
  func acquire(
    id: UInt64, priority: PriorityBox, client: ClientID = .shared, origin: String = ""
  ) async throws -> Grant {
    try Task.checkCancellation()
    // Waiters that could run would already have been given a slot, so any still waiting are
    // held back by a share or a cap: they do not block this one.
    if eligible(priority.value, client, origin) && mostUrgentEligibleWaiter() == nil {
      return grant(priority.value, client, origin)
    }
    nextSequence += 1
    let sequence = nextSequence
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        waiters.append(
          Waiter(
            id: id, sequence: sequence, priority: priority, client: client, origin: origin,
            continuation: continuation))
      }
    } onCancel: {
      Task { await self.cancelWaiter(id: id) }
    }
  }

  /// Gives a slot back and hands free slots to the most urgent waiters that may have one.
  func release(_ grant: Grant) {
    active -= 1
    if grant.prefetch {
      activePrefetch -= 1
    } else {
      Self.decrement(&byClient, grant.client)
    }
    if !grant.origin.isEmpty { Self.decrement(&byOrigin, grant.origin) }
    reconsider()
  }

  /// Hands free slots to waiters that may now have one: after a release, or after a waiting
  /// prefetch job was raised (a visible consumer joined it) and no longer counts against the
  /// prefetch share.
  func reconsider() {
    while let next = mostUrgentEligibleWaiter() {
      let waiter = waiters.remove(at: next)
      waiter.continuation.resume(
        returning: grant(waiter.priority.value, waiter.client, waiter.origin))
    }
  }

  private func eligible(_ priority: ImagePriority, _ client: ClientID, _ origin: String) -> Bool {
    if !origin.isEmpty && byOrigin[origin, default: 0] >= originLimit { return false }
    guard priority == .prefetch else {
      return active - activePrefetch < limit && byClient[client, default: 0] < clientLimit
    }
    return active < limit && activePrefetch < prefetchLimit
  }

  private func grant(_ priority: ImagePriority, _ client: ClientID, _ origin: String) -> Grant {
    active += 1
    let prefetch = priority == .prefetch
    if prefetch {
      activePrefetch += 1
    } else {
      byClient[client, default: 0] += 1
    }
    if !origin.isEmpty { byOrigin[origin, default: 0] += 1 }
    return Grant(prefetch: prefetch, client: client, origin: origin)
  }

  /// The waiter to serve next: most urgent, then its client holding the fewest slots, then
  /// the oldest.
  private func mostUrgentEligibleWaiter() -> Int? {
    var best: Int?
    var bestRank = (ImagePriority.prefetch, 0, UInt64(0))
    for i in waiters.indices {
      let waiter = waiters[i]
      let priority = waiter.priority.value
      guard eligible(priority, waiter.client, waiter.origin) else { continue }
      let rank = (priority, byClient[waiter.client, default: 0], waiter.sequence)
      if best == nil || rank.0 > bestRank.0
        || (rank.0 == bestRank.0 && (rank.1, rank.2) < (bestRank.1, bestRank.2))
      {
        (best, bestRank) = (i, rank)
      }
    }
    return best
  }

  private static func decrement<Key: Hashable>(_ counts: inout [Key: Int], _ key: Key) {
    let remaining = (counts[key] ?? 1) - 1
    counts[key] = remaining > 0 ? remaining : nil
  }

  private func cancelWaiter(id: UInt64) {
    guard let i = waiters.firstIndex(where: { $0.id == id }) else { return }
    waiters.remove(at: i).continuation.resume(throwing: CancellationError())
  }
}
