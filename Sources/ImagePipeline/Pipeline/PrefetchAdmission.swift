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
/// the order announced. A waiter raised above prefetch (a visible consumer joined its job)
/// leaves without a place: it is no longer speculative.
actor PrefetchAdmission {
  private struct Waiter {
    let sequence: UInt64
    let client: ClientID
    let priority: PriorityBox
    /// Whether anyone still wants the job (see `JobContext.isWanted`).
    let isWanted: @Sendable () -> Bool
    let continuation: CheckedContinuation<Bool, any Error>
  }

  /// Prefetch jobs allowed in progress at once.
  let limit: Int
  /// Places clients without visible requests of their own may use while others have some.
  let busyLimit: Int
  private let visibleActivity: VisibleActivity
  private(set) var inProgress = 0
  private var placesByClient: [ClientID: Int] = [:]
  private var waitingByClient: [ClientID: Int] = [:]
  private var recheckScheduled = false
  /// Set when a waiter nobody wants was passed over: its cancellation is on the way, but if a
  /// new subscriber joined instead, only a later look gives it its place.
  private var passedOverAbandoned = false
  private var waiters: [UInt64: Waiter] = [:]
  /// Each client's waiting ids, oldest first; ids no longer in `waiters` are skipped lazily.
  private var queues: [ClientID: IDQueue] = [:]
  private var nextSequence: UInt64 = 0

  init(limit: Int, busyLimit: Int? = nil, visibleActivity: VisibleActivity = VisibleActivity()) {
    self.limit = max(1, limit)
    self.busyLimit = min(self.limit, max(1, busyLimit ?? self.limit / 4))
    self.visibleActivity = visibleActivity
  }

  /// Whether `client` may take a free place now.
  private func mayTake(_ client: ClientID, busy: Bool) -> Bool {
    guard inProgress < limit else { return false }
    return !busy || inProgress < busyLimit || visibleActivity.isInteractive(client)
  }

  /// Jobs waiting for a place.
  var queued: Int { waiters.count }

  /// Waits for a place. Returns true when a place was taken (give it back with `leave`), false
  /// when the job was raised above prefetch while waiting and needs none. Throws
  /// `CancellationError` if the task is cancelled while waiting.
  func enter(
    id: UInt64, client: ClientID, priority: PriorityBox,
    isWanted: @escaping @Sendable () -> Bool = { true }
  ) async throws -> Bool {
    try Task.checkCancellation()
    guard priority.value == .prefetch else { return false }
    if waiters.isEmpty && mayTake(client, busy: visibleActivity.isBusy) {
      take(client)
      return true
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        nextSequence += 1
        waiters[id] = Waiter(
          sequence: nextSequence, client: client, priority: priority, isWanted: isWanted,
          continuation: continuation)
        waitingByClient[client, default: 0] += 1
        queues[client, default: IDQueue()].append(id)
        // Others may be waiting only because they are held back; this one may not be.
        fillPlaces()
      }
    } onCancel: {
      Task { await self.cancelWaiter(id: id) }
    }
  }

  /// Gives a place back and hands it on.
  func leave(client: ClientID) {
    inProgress -= 1
    let remaining = (placesByClient[client] ?? 1) - 1
    placesByClient[client] = remaining > 0 ? remaining : nil
    fillPlaces()
  }

  /// Lets the waiter `id` go without a place if it was raised above prefetch.
  func priorityChanged(id: UInt64) {
    guard let waiter = waiters[id], waiter.priority.value > .prefetch else { return }
    forget(id)
    waiter.continuation.resume(returning: false)
  }

  private func fillPlaces() {
    let busy = visibleActivity.isBusy
    while inProgress < limit, let (client, id) = nextWaiter(busy: busy) {
      let waiter = forget(id)!
      take(client)
      waiter.continuation.resume(returning: true)
    }
    scheduleRecheckIfHeldBack()
  }

  /// Waiters held back only by the busy limit get no `leave` to wake them when visible work
  /// stops: look again once the window has passed.
  private func scheduleRecheckIfHeldBack() {
    guard !recheckScheduled, !waiters.isEmpty, inProgress < limit,
      inProgress >= busyLimit || passedOverAbandoned
    else { return }
    passedOverAbandoned = false
    recheckScheduled = true
    let window = visibleActivity.window
    Task {
      try? await Task.sleep(for: .seconds(window))
      self.recheck()
    }
  }

  private func recheck() {
    recheckScheduled = false
    fillPlaces()
  }

  @discardableResult
  private func forget(_ id: UInt64) -> Waiter? {
    guard let waiter = waiters.removeValue(forKey: id) else { return nil }
    let remaining = (waitingByClient[waiter.client] ?? 1) - 1
    waitingByClient[waiter.client] = remaining > 0 ? remaining : nil
    return waiter
  }

  private func take(_ client: ClientID) {
    inProgress += 1
    placesByClient[client, default: 0] += 1
  }

  /// The next waiter: its client holds the fewest places, then has the fewest waiting, then
  /// asked first.
  private func nextWaiter(busy: Bool) -> (ClientID, UInt64)? {
    var best: (client: ClientID, rank: (Int, Int, UInt64))?
    for client in Array(queues.keys) {
      // Drop ids that left (cancelled or raised) from the front.
      while let first = queues[client]?.first, waiters[first] == nil {
        queues[client]!.removeFirst()
      }
      if queues[client]?.first == nil {
        queues[client] = nil
        continue
      }
      guard mayTake(client, busy: busy) else { continue }
      // Skip (without dropping) a head waiter everyone has just left: its cancellation is a
      // hop away, and the place belongs to someone who still wants theirs.
      if let head = queues[client]?.first, let waiter = waiters[head], !waiter.isWanted() {
        passedOverAbandoned = true
        continue
      }
      let rank = (
        placesByClient[client] ?? 0, waitingByClient[client] ?? 0,
        waiters[queues[client]!.first!]!.sequence
      )
      if let current = best, current.rank < rank { continue }
      best = (client, rank)
    }
    guard let client = best?.client, let id = queues[client]?.removeFirst() else { return nil }
    return (client, id)
  }

  private func cancelWaiter(id: UInt64) {
    guard let waiter = forget(id) else { return }
    waiter.continuation.resume(throwing: CancellationError())
    // It may have been the head of its client's queue, holding the rest back.
    if passedOverAbandoned { fillPlaces() }
  }
}

/// A FIFO of ids with O(1) removal from the front.
private struct IDQueue {
  private var ids: [UInt64] = []
  private var head = 0

  var first: UInt64? { head < ids.count ? ids[head] : nil }

  mutating func append(_ id: UInt64) { ids.append(id) }

  @discardableResult
  mutating func removeFirst() -> UInt64? {
    guard head < ids.count else { return nil }
    let id = ids[head]
    head += 1
    // Reclaim the consumed prefix once it is half the storage.
    if head * 2 >= ids.count {
      ids.removeFirst(head)
      head = 0
    }
    return id
  }
}
