/// Caps the prefetch thumbnails in progress (downloading, waiting for a decode thread or
/// decoding) and shares that capacity fairly between clients.
///
/// Prefetch decodes run on low-priority threads, but a prefetch job's download, bookkeeping
/// and cache write run at normal priority. Without a cap, a client announcing thousands of
/// items keeps all of that busy and slows what is on screen. With it, prefetch advances at
/// the pace its low-priority decodes keep up with (a place is held until the decode ends).
///
/// While visible requests are arriving, clients that are not showing anything themselves
/// (background warming, a flood of hints) may take a place only while fewer than `busyLimit`
/// are in use: their work yields to what someone is waiting for. The look-ahead of clients
/// that are showing things keeps the full `limit`, because it is about to be shown.
///
/// A free place goes to the waiting client holding the fewest places (max-min fairness); among
/// equals, to the one with the fewest waiting (a list's look-ahead of a few dozen items before a
/// client announcing thousands), then to the oldest request. Within a client, requests go in
/// the order announced, skipping one nobody wants any more (its cancellation is on the way).
/// A waiter raised above prefetch (a visible consumer joined its job) leaves without a place:
/// it is no longer speculative.
final class PrefetchAdmission: Sendable {
  /// What a waiter asks for.
  struct Request: Sendable {
    /// The caller's id for the job (`priorityChanged`).
    let id: UInt64
    let client: ClientID
    let priority: PriorityBox
    /// Whether anyone still wants the job (see `JobContext.isWanted`).
    let isWanted: @Sendable () -> Bool
  }

  /// Places in use, by client, and who goes next.
  struct Policy: WaitPolicy {
    let limit: Int
    let busyLimit: Int
    let visibleActivity: VisibleActivity
    var inProgress = 0
    var placesByClient: [ClientID: Int] = [:]
    var waitingByClient: [ClientID: Int] = [:]
    /// Set when a waiter nobody wants was passed over: its cancellation is on the way, but if
    /// a new subscriber joined instead, only a later look gives it its place.
    var passedOverAbandoned = false

    func mayGoAtOnce(_ request: Request) -> Bool {
      mayTake(request.client, busy: visibleActivity.isBusy)
    }

    /// Whether `client` may take a free place now.
    func mayTake(_ client: ClientID, busy: Bool) -> Bool {
      guard inProgress < limit else { return false }
      return !busy || inProgress < busyLimit || visibleActivity.isInteractive(client)
    }

    /// Its client holds the fewest places, then has the fewest waiting, then asked first.
    mutating func next(
      _ waiters: WaiterList<Request>
    ) -> (id: UInt64, answer: Result<Bool, any Error>)? {
      guard inProgress < limit else { return nil }
      let busy = visibleActivity.isBusy
      var passedOver = false
      let best = waiters.bestOfPairs { waiter -> (Int, Int)? in
        let request = waiter.entry
        guard mayTake(request.client, busy: busy) else { return nil }
        guard request.isWanted() else {
          passedOver = true
          return nil
        }
        return (
          -placesByClient[request.client, default: 0],
          -waitingByClient[request.client, default: 0]
        )
      }
      if passedOver { passedOverAbandoned = true }
      guard let best else { return nil }
      take(best.entry.client)
      return (best.id, .success(true))
    }

    mutating func take(_ client: ClientID) {
      inProgress += 1
      placesByClient[client, default: 0] += 1
    }

    mutating func queued(_ waiter: WaiterList<Request>.Waiter) {
      waitingByClient[waiter.entry.client, default: 0] += 1
    }

    mutating func removed(_ waiter: WaiterList<Request>.Waiter) {
      waitingByClient.decrement(waiter.entry.client)
    }

    /// Waiters held back only by the busy limit get no `leave` to wake them when visible work
    /// stops: look again once the window has passed.
    mutating func lookAgain(_ waiters: WaiterList<Request>) -> Duration? {
      guard inProgress < limit, inProgress >= busyLimit || passedOverAbandoned else { return nil }
      passedOverAbandoned = false
      return .seconds(visibleActivity.window)
    }
  }

  private let waiters: PriorityWaiters<Policy>
  /// Prefetch jobs allowed in progress at once.
  let limit: Int
  /// Places clients without visible requests of their own may use while others have some.
  let busyLimit: Int

  init(limit: Int, busyLimit: Int? = nil, visibleActivity: VisibleActivity = VisibleActivity()) {
    self.limit = max(1, limit)
    self.busyLimit = min(self.limit, max(1, busyLimit ?? self.limit / 4))
    waiters = PriorityWaiters(
      Policy(limit: self.limit, busyLimit: self.busyLimit, visibleActivity: visibleActivity))
  }

  /// Jobs waiting for a place.
  var queued: Int { waiters.count }
  /// Places in use.
  var inProgress: Int { waiters.read { $0.inProgress } }

  /// Waits for a place. Returns true when a place was taken (give it back with `leave`), false
  /// when the job was raised above prefetch while waiting and needs none. Throws
  /// `CancellationError` if the task is cancelled while waiting.
  func enter(
    id: UInt64, client: ClientID, priority: PriorityBox,
    isWanted: @escaping @Sendable () -> Bool = { true }
  ) async throws -> Bool {
    try Task.checkCancellation()
    guard priority.value == .prefetch else { return false }
    return try await waiters.wait(
      Request(id: id, client: client, priority: priority, isWanted: isWanted))
  }

  /// Gives a place back and hands it on.
  func leave(client: ClientID) {
    waiters.update { policy in
      policy.inProgress -= 1
      policy.placesByClient.decrement(client)
    }
  }

  /// Lets the waiter `id` go without a place if it was raised above prefetch.
  func priorityChanged(id: UInt64) {
    waiters.answer(
      where: { $0.id == id && $0.priority.value > .prefetch }, with: .success(false))
  }
}
