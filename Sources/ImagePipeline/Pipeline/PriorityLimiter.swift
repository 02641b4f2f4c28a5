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
final class PriorityLimiter: Sendable {
  /// A slot held; give it back with `release`.
  struct Grant: Sendable, Hashable {
    /// Whether it counts against the prefetch share.
    let prefetch: Bool
    let client: ClientID
    let origin: String
  }

  /// What a waiter asks for.
  struct Request: Sendable {
    let priority: PriorityBox
    let client: ClientID
    let origin: String
  }

  /// Who holds the slots, and who goes next.
  struct Policy: WaitPolicy {
    let limit: Int
    let prefetchLimit: Int
    let clientLimit: Int
    let originLimit: Int
    var active = 0
    var activePrefetch = 0
    var byClient: [ClientID: Int] = [:]
    var byOrigin: [String: Int] = [:]

    /// Most urgent, then its client holding the fewest slots, then the oldest.
    mutating func next(
      _ waiters: WaiterList<Request>
    ) -> (id: UInt64, answer: Result<Grant, any Error>)? {
      let best = waiters.bestOfPairs { waiter -> (ImagePriority, Int)? in
        let request = waiter.entry
        let priority = request.priority.value
        guard eligible(priority, request.client, request.origin) else { return nil }
        return (priority, -byClient[request.client, default: 0])
      }
      guard let best else { return nil }
      let request = best.entry
      return (best.id, .success(grant(request.priority.value, request.client, request.origin)))
    }

    func mayGoAtOnce(_ request: Request) -> Bool {
      eligible(request.priority.value, request.client, request.origin)
    }

    func eligible(_ priority: ImagePriority, _ client: ClientID, _ origin: String) -> Bool {
      if !origin.isEmpty && byOrigin[origin, default: 0] >= originLimit { return false }
      guard priority == .prefetch else {
        return active - activePrefetch < limit && byClient[client, default: 0] < clientLimit
      }
      return active < limit && activePrefetch < prefetchLimit
    }

    mutating func grant(_ priority: ImagePriority, _ client: ClientID, _ origin: String) -> Grant {
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

    mutating func release(_ grant: Grant) {
      active -= 1
      if grant.prefetch {
        activePrefetch -= 1
      } else {
        byClient.decrement(grant.client)
      }
      if !grant.origin.isEmpty { byOrigin.decrement(grant.origin) }
    }
  }

  private let waiters: PriorityWaiters<Policy>

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

  init(limit: Int, originLimit: Int = .max) {
    self.limit = max(1, limit)
    prefetchLimit = max(1, self.limit * 3 / 4)
    clientLimit = max(1, self.limit - max(1, self.limit / 4))
    self.originLimit = max(1, originLimit)
    waiters = PriorityWaiters(
      Policy(
        limit: self.limit, prefetchLimit: prefetchLimit, clientLimit: clientLimit,
        originLimit: self.originLimit))
  }

  /// Jobs waiting for a slot.
  var queued: Int { waiters.count }
  /// Slots held now.
  var active: Int { waiters.read { $0.active } }

  /// Waits for a slot for `client`'s download from `origin` ("" for none, such as files).
  /// Throws `CancellationError` if the task is cancelled while waiting.
  func acquire(
    priority: PriorityBox, client: ClientID = .shared, origin: String = ""
  ) async throws -> Grant {
    try await waiters.wait(Request(priority: priority, client: client, origin: origin))
  }

  /// Gives a slot back and hands free slots to the most urgent waiters that may have one.
  func release(_ grant: Grant) {
    waiters.update { $0.release(grant) }
  }

  /// Hands free slots to waiters that may now have one: after a waiting prefetch job was
  /// raised (a visible consumer joined it) and no longer counts against the prefetch share.
  func reconsider() {
    waiters.update { _ in }
  }
}

extension Dictionary where Value == Int {
  /// Counts one fewer for `key`, dropping it at zero.
  mutating func decrement(_ key: Key) {
    let remaining = (self[key] ?? 1) - 1
    self[key] = remaining > 0 ? remaining : nil
  }
}
