import Synchronization

/// The waiting half that every queue of the pipeline shares (memory, fetch slots, prefetch
/// places, decode threads, name lookups): numbered waiters, each answered exactly once,
/// whether by its turn, a cancellation or a deadline, and whichever came first.
///
/// A waiter is numbered (`arrive`) before it queues (`queue`). A cancellation or deadline that
/// comes in between, which a cancellation handler can (it runs at once for a task that was
/// already cancelled, and may race the code that queues), is kept and answers the waiter the
/// moment it would queue; one that comes after it was answered does nothing. So no queue can
/// lose a cancellation or keep someone waiting who left. The list holds no lock of its own:
/// it lives inside its owner's (a `Mutex`, a `ConditionLock`), and whatever it returns is to be
/// answered once that lock is released.
struct WaiterList<Entry> {
  /// One queued waiter.
  struct Waiter {
    /// Numbered in arrival order: lower came first.
    let id: UInt64
    let entry: Entry
  }

  private(set) var byID: [UInt64: Waiter] = [:]
  private var arriving: Set<UInt64> = []
  private var left: [UInt64: any Error] = [:]
  private var lastID: UInt64 = 0

  /// Waiters queued now.
  var count: Int { byID.count }
  var isEmpty: Bool { byID.isEmpty }
  /// Leaves kept for waiters that have not queued yet.
  var pendingLeaves: Int { left.count }
  /// The queued waiters, in no particular order (rank by `id`).
  var waiters: Dictionary<UInt64, Waiter>.Values { byID.values }

  /// Numbers a waiter about to queue.
  mutating func arrive() -> UInt64 {
    lastID += 1
    arriving.insert(lastID)
    return lastID
  }

  /// Queues the waiter `id` numbered by `arrive`. Returns why it may not (it left before it
  /// queued), and then it is not queued.
  mutating func queue(_ id: UInt64, _ entry: Entry) -> (any Error)? {
    arriving.remove(id)
    if let error = left.removeValue(forKey: id) { return error }
    byID[id] = Waiter(id: id, entry: entry)
    return nil
  }

  /// The waiter `id` leaves (cancelled, or its deadline passed). Returns its entry, which the
  /// caller answers with the error, when it was queued; when it has not queued yet, the error
  /// waits for it there. Nothing for one already answered.
  mutating func leave(_ id: UInt64, with error: any Error) -> Entry? {
    if arriving.contains(id) {
      if left[id] == nil { left[id] = error }
      return nil
    }
    return byID.removeValue(forKey: id)?.entry
  }

  /// Takes the waiter `id` out of the queue (its turn came), if it is still there.
  mutating func remove(_ id: UInt64) -> Waiter? { byID.removeValue(forKey: id) }

  /// The queued waiter with the highest rank among those `rank` gives one (nil: may not go
  /// now); equal ranks go to the oldest.
  func best<Rank: Comparable>(by rank: (Waiter) -> Rank?) -> Waiter? {
    var best: (waiter: Waiter, rank: Rank)?
    for waiter in byID.values {
      guard let candidate = rank(waiter) else { continue }
      if let current = best,
        candidate < current.rank
          || (candidate == current.rank && waiter.id > current.waiter.id)
      {
        continue
      }
      best = (waiter, candidate)
    }
    return best?.waiter
  }

  /// `best(by:)` for a rank of two parts, compared first part first.
  func bestOfPairs<First: Comparable, Second: Comparable>(
    by rank: (Waiter) -> (First, Second)?
  ) -> Waiter? {
    best { waiter in rank(waiter).map { RankPair(first: $0.0, second: $0.1) } }
  }
}

/// Two ranks compared in order (tuples are not `Comparable`).
private struct RankPair<First: Comparable, Second: Comparable>: Comparable {
  let first: First
  let second: Second

  static func < (lhs: Self, rhs: Self) -> Bool {
    (lhs.first, lhs.second) < (rhs.first, rhs.second)
  }
}

/// What decides who of a `PriorityWaiters` queue goes next, and what they get.
protocol WaitPolicy: Sendable {
  /// What a waiter asks for (its priority, its client, its size).
  associatedtype Request: Sendable
  /// What a waiter gets when its turn comes.
  associatedtype Grant: Sendable

  /// The queued waiter to answer now and its answer, counted as given; nil when none may go.
  /// Called again until it says nil.
  mutating func next(_ waiters: WaiterList<Request>) -> (
    id: UInt64, answer: Result<Grant, any Error>
  )?
  /// Whether a waiter that just queued could go at once. False lets it wait without a look at
  /// every waiter (an arrival frees nothing, so only the newcomer could go); true, or
  /// unsure, asks `next`. Queues thousands deep (a session's loads for an origin at its cap)
  /// pay one look per arrival instead of a scan.
  func mayGoAtOnce(_ request: Request) -> Bool
  /// A waiter queued (policies that keep an index of waiters keep it here).
  mutating func queued(_ waiter: WaiterList<Request>.Waiter)
  /// A waiter left the queue, answered or not.
  mutating func removed(_ waiter: WaiterList<Request>.Waiter)
  /// When waiters are held back by something no release will announce (time passing), how long
  /// until the queue should look again.
  mutating func lookAgain(_ waiters: WaiterList<Request>) -> Duration?
}

extension WaitPolicy {
  func mayGoAtOnce(_ request: Request) -> Bool { true }
  mutating func queued(_ waiter: WaiterList<Request>.Waiter) {}
  mutating func removed(_ waiter: WaiterList<Request>.Waiter) {}
  mutating func lookAgain(_ waiters: WaiterList<Request>) -> Duration? { nil }
}

/// An async queue of waiters under one policy: `wait` queues a request and returns its grant
/// when the policy gives it one; cancellation (before or after queueing) and `leave` answer a
/// waiter at once and let the policy look again (a head that leaves may let others in).
/// Changes to the policy's state go through `update`, after which the policy looks again.
/// Continuations are answered outside the lock.
final class PriorityWaiters<Policy: WaitPolicy>: Sendable {
  private struct State {
    var policy: Policy
    var list = WaiterList<Policy.Request>()
    var continuations: [UInt64: CheckedContinuation<Policy.Grant, any Error>] = [:]
    var waits = 0
    var lookAgainScheduled = false
  }

  private typealias Answer = (
    CheckedContinuation<Policy.Grant, any Error>, Result<Policy.Grant, any Error>
  )

  /// What one pass under the lock leaves to do once it is released.
  private struct Outcome {
    var answers: [Answer] = []
    /// When to look again, if the policy holds waiters back by time alone.
    var lookAgain: Duration?
  }

  private let state: Mutex<State>
  private let afterGrants: (@Sendable () -> Void)?

  /// A queue under `policy`; `afterGrants` runs (outside the lock) whenever waiters were given
  /// their grants.
  init(_ policy: Policy, afterGrants: (@Sendable () -> Void)? = nil) {
    state = Mutex(State(policy: policy))
    self.afterGrants = afterGrants
  }

  /// Waiters queued now.
  var count: Int { state.withLock { $0.list.count } }
  /// Waiters that did not go at once, so far.
  var waits: Int { state.withLock { $0.waits } }

  /// Reads the policy's state.
  func read<R>(_ body: (Policy) -> R) -> R { state.withLock { body($0.policy) } }

  /// Changes the policy's state (a release, a raised priority), then lets waiters go that may
  /// (unless `admitting` is false: a change that frees nothing, such as more bytes counted).
  @discardableResult
  func update<R>(admitting: Bool = true, _ body: (inout Policy) -> R) -> R {
    let (result, outcome) = state.withLock { state in
      let result = body(&state.policy)
      return (result, admitting ? Self.settle(&state, Self.admit(&state)) : Outcome())
    }
    finish(outcome)
    return result
  }

  /// Waits for `request`'s grant. Throws `CancellationError` if the task is cancelled first
  /// (before or after it queued), or what the policy answers instead of a grant.
  func wait(_ request: Policy.Request) async throws -> Policy.Grant {
    let id = state.withLock { $0.list.arrive() }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let outcome = state.withLock { state -> Outcome in
          if let error = state.list.queue(id, request) {
            return Outcome(answers: [(continuation, .failure(error))])
          }
          state.continuations[id] = continuation
          state.policy.queued(state.list.byID[id]!)
          let answers = state.policy.mayGoAtOnce(request) ? Self.admit(&state) : []
          if state.continuations[id] != nil { state.waits += 1 }
          return Self.settle(&state, answers)
        }
        finish(outcome)
      }
    } onCancel: {
      leave(id, with: CancellationError())
    }
  }

  /// Answers the waiter `id` with `error` (cancellation, a deadline), queued or about to be.
  func leave(_ id: UInt64, with error: any Error) {
    let outcome = state.withLock { state -> Outcome in
      guard let waiter = state.list.remove(id) else {
        // Not queued: about to queue (the error waits for it there), or answered already.
        _ = state.list.leave(id, with: error)
        return Outcome()
      }
      state.policy.removed(waiter)
      let continuation = state.continuations.removeValue(forKey: id)!
      return Self.settle(&state, [(continuation, .failure(error))] + Self.admit(&state))
    }
    finish(outcome)
  }

  /// Answers every queued waiter `matching` with `answer` (a waiter the policy no longer
  /// needs to hold, such as a prefetch raised to visible).
  func answer(
    where matching: (Policy.Request) -> Bool, with answer: Result<Policy.Grant, any Error>
  ) {
    let outcome = state.withLock { state -> Outcome in
      var answers: [Answer] = []
      var ids: [UInt64] = []
      for waiter in state.list.waiters where matching(waiter.entry) { ids.append(waiter.id) }
      for id in ids {
        guard let waiter = state.list.remove(id) else { continue }
        state.policy.removed(waiter)
        answers.append((state.continuations.removeValue(forKey: waiter.id)!, answer))
      }
      return Self.settle(&state, answers + Self.admit(&state))
    }
    finish(outcome)
  }

  private static func admit(_ state: inout State) -> [Answer] {
    var answers: [Answer] = []
    while let (id, answer) = state.policy.next(state.list) {
      guard let waiter = state.list.remove(id) else { continue }
      state.policy.removed(waiter)
      answers.append((state.continuations.removeValue(forKey: id)!, answer))
    }
    return answers
  }

  /// Ends a pass under the lock that may have changed who waits and why: asks the policy, in
  /// the same pass, whether waiters are held back by time alone.
  private static func settle(_ state: inout State, _ answers: [Answer]) -> Outcome {
    var outcome = Outcome(answers: answers)
    if !state.lookAgainScheduled, !state.list.isEmpty,
      let delay = state.policy.lookAgain(state.list)
    {
      state.lookAgainScheduled = true
      outcome.lookAgain = delay
    }
    return outcome
  }

  private func finish(_ outcome: Outcome) {
    if let delay = outcome.lookAgain { lookAgain(after: delay) }
    if outcome.answers.contains(where: { if case .success = $0.1 { true } else { false } }) {
      afterGrants?()
    }
    for (continuation, answer) in outcome.answers { continuation.resume(with: answer) }
  }

  /// Looks again once `delay` has passed.
  private func lookAgain(after delay: Duration) {
    Task { [weak self] in
      try? await Task.sleep(for: delay)
      guard let self else { return }
      self.state.withLock { $0.lookAgainScheduled = false }
      self.update { _ in }
    }
  }
}
