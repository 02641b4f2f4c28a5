import Synchronization

/// One stage of shared work: at most one job per key, however many consumers want it.
///
/// Each consumer holds its own subscription (an id plus a priority box). The job runs while at
/// least one subscription wants it, at the most urgent subscriber's priority. A subscriber that
/// leaves gets `CancellationError` at once and never cancels work another still wants; when the
/// last one leaves, the job's task is cancelled and its cancellation flag raised, and the entry
/// is forgotten so a later request starts afresh. A consumer that arrives while the job runs
/// joins it and is told so (`joined`).
actor CoalescingStage<Key: Hashable & Sendable, Value: Sendable> {
  /// What a subscriber receives.
  struct Delivery: Sendable {
    let value: Value
    /// True when this subscriber joined work another had started.
    let joined: Bool
  }

  typealias Work = @Sendable (Key, JobContext) async throws -> Value

  private struct Subscriber {
    let priority: PriorityBox
    let joined: Bool
    let continuation: CheckedContinuation<Delivery, any Error>
  }

  private final class Entry {
    let context: JobContext
    var subscribers: [UInt64: Subscriber] = [:]
    /// The subscribers' priority boxes, kept apart so recomputing the maximum does not copy
    /// whole subscriber records.
    var priorities: [UInt64: PriorityBox] = [:]
    var task: Task<Void, Never>?
    init(context: JobContext) { self.context = context }
  }

  private var entries: [Key: Entry] = [:]
  private let onJoin: @Sendable () -> Void
  private let onWorkCancelled: @Sendable () -> Void

  /// `onJoin` counts coalesced joins; `onWorkCancelled` counts jobs stopped because everyone left.
  init(
    onJoin: @escaping @Sendable () -> Void = {},
    onWorkCancelled: @escaping @Sendable () -> Void = {}
  ) {
    self.onJoin = onJoin
    self.onWorkCancelled = onWorkCancelled
  }

  /// Keys with work in flight.
  var inFlight: Int { entries.count }

  /// Subscribes to the job for `key`, starting it with `work` if none runs (on behalf of
  /// `client`). The subscription ends when the calling task is cancelled.
  func value(
    for key: Key, subscriber id: UInt64, priority: PriorityBox, client: ClientID = .shared,
    work: @escaping Work
  ) async throws -> Delivery {
    let ticket = Ticket()
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        subscribe(key, id, priority, client, ticket, continuation, work)
      }
    } onCancel: {
      // At once, on the cancelling thread: the job knows one fewer wants it before the
      // stage gets to forget the subscription.
      ticket.cancel()
      Task { await self.unsubscribe(key, id) }
    }
  }

  /// One subscription's link to the job it counts for, so a cancel can uncount it at once.
  private final class Ticket: Sendable {
    private let state = Mutex<(context: JobContext?, cancelled: Bool)>((nil, false))

    /// Counts the subscription for `context`, unless it was already cancelled.
    func attach(_ context: JobContext) {
      state.withLock { state in
        guard !state.cancelled else { return }
        state.context = context
        context.countSubscriber()
      }
    }

    func cancel() {
      state.withLock { state in
        guard !state.cancelled else { return }
        state.cancelled = true
        state.context?.uncountSubscriber()
      }
    }
  }

  /// Re-reads the subscriber's priority box after the consumer changed it.
  func priorityChanged(for key: Key) {
    guard let entry = entries[key] else { return }
    updatePriority(entry)
  }

  private func subscribe(
    _ key: Key, _ id: UInt64, _ priority: PriorityBox, _ client: ClientID, _ ticket: Ticket,
    _ continuation: CheckedContinuation<Delivery, any Error>, _ work: @escaping Work
  ) {
    if let entry = entries[key] {
      ticket.attach(entry.context)
      entry.subscribers[id] = Subscriber(
        priority: priority, joined: true, continuation: continuation)
      entry.priorities[id] = priority
      onJoin()
      // A join can only raise the priority: O(1), so a thousand joins stay linear.
      if priority.value > entry.context.priority.value { entry.context.setPriority(priority.value) }
      return
    }
    let entry = Entry(context: JobContext(priority: priority.value, client: client))
    ticket.attach(entry.context)
    entry.subscribers[id] = Subscriber(
      priority: priority, joined: false, continuation: continuation)
    entry.priorities[id] = priority
    entries[key] = entry
    let context = entry.context
    entry.task = Task {
      let result: Result<Value, any Error>
      do {
        result = .success(try await work(key, context))
      } catch {
        result = .failure(error)
      }
      self.finish(key, entry, result)
    }
  }

  private func unsubscribe(_ key: Key, _ id: UInt64) {
    guard let entry = entries[key], let subscriber = entry.subscribers.removeValue(forKey: id)
    else { return }
    entry.priorities[id] = nil
    subscriber.continuation.resume(throwing: CancellationError())
    if entry.subscribers.isEmpty {
      entries[key] = nil
      entry.context.cancellation.cancel()
      entry.task?.cancel()
      onWorkCancelled()
    } else {
      updatePriority(entry)
    }
  }

  /// Recomputes the most urgent subscriber's priority (after a leave or an explicit change).
  private func updatePriority(_ entry: Entry) {
    var highest = ImagePriority.prefetch
    for box in entry.priorities.values where box.value > highest {
      highest = box.value
      if highest == .visible { break }
    }
    entry.context.setPriority(highest)
  }

  private func finish(_ key: Key, _ entry: Entry, _ result: Result<Value, any Error>) {
    // The entry may already be gone (everyone left) or replaced by newer work.
    if entries[key] === entry { entries[key] = nil }
    for subscriber in entry.subscribers.values {
      subscriber.continuation.resume(
        with: result.map { Delivery(value: $0, joined: subscriber.joined) })
    }
    entry.subscribers.removeAll()
  }
}

/// Numbers for subscribers, places and disk removals, unique within one pipeline.
final class SubscriberIDs: Sendable {
  private let last = Atomic<UInt64>(0)

  /// A number not given before.
  func next() -> UInt64 { last.add(1, ordering: .relaxed).newValue }
}
