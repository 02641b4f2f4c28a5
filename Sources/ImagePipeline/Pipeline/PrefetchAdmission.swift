/// Caps the prefetch thumbnails in progress (downloading, waiting for a decode thread or
/// decoding) and shares that capacity fairly between clients.
///
/// Prefetch decodes already run only on idle CPU, but a prefetch job's download, bookkeeping
/// and cache writes run at normal priority. Without a cap, a client announcing thousands of
/// items keeps all of that busy and slows what is on screen; with it, prefetch advances at the
/// pace its idle-time decodes keep up with, because a place is held until the decode ends.
/// A free place goes to the waiting client with the fewest places (max-min fairness), oldest
/// request first within a client, so a flood from one client cannot delay another's
/// look-ahead by more than one place's turn. A waiter raised above prefetch (a visible
/// consumer joined its job) leaves without a place: it is no longer speculative.
actor PrefetchAdmission {
  private struct Waiter {
    let priority: PriorityBox
    let continuation: CheckedContinuation<Bool, any Error>
  }

  /// Prefetch jobs allowed in progress at once.
  let limit: Int
  private(set) var inProgress = 0
  private var placesByClient: [ClientID: Int] = [:]
  private var waiters: [UInt64: Waiter] = [:]
  /// Each client's waiting ids, oldest first; ids no longer in `waiters` are skipped lazily.
  private var queues: [ClientID: IDQueue] = [:]

  init(limit: Int) { self.limit = max(1, limit) }

  /// Jobs waiting for a place.
  var queued: Int { waiters.count }

  /// Waits for a place. Returns true when a place was taken (give it back with `leave`), false
  /// when the job was raised above prefetch while waiting and needs none. Throws
  /// `CancellationError` if the task is cancelled while waiting.
  func enter(id: UInt64, client: ClientID, priority: PriorityBox) async throws -> Bool {
    try Task.checkCancellation()
    guard priority.value == .prefetch else { return false }
    if inProgress < limit && waiters.isEmpty {
      take(client)
      return true
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        waiters[id] = Waiter(priority: priority, continuation: continuation)
        queues[client, default: IDQueue()].append(id)
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
    waiters[id] = nil
    waiter.continuation.resume(returning: false)
  }

  private func fillPlaces() {
    while inProgress < limit, let (client, id) = nextWaiter() {
      let waiter = waiters.removeValue(forKey: id)!
      take(client)
      waiter.continuation.resume(returning: true)
    }
  }

  private func take(_ client: ClientID) {
    inProgress += 1
    placesByClient[client, default: 0] += 1
  }

  /// The oldest waiter of the waiting client holding the fewest places.
  private func nextWaiter() -> (ClientID, UInt64)? {
    var best: (client: ClientID, places: Int)?
    for client in Array(queues.keys) {
      // Drop ids that left (cancelled or raised) from the front.
      while let first = queues[client]?.first, waiters[first] == nil {
        queues[client]!.removeFirst()
      }
      if queues[client]?.first == nil {
        queues[client] = nil
        continue
      }
      let places = placesByClient[client] ?? 0
      if best == nil || places < best!.places { best = (client, places) }
    }
    guard let client = best?.client, let id = queues[client]?.removeFirst() else { return nil }
    return (client, id)
  }

  private func cancelWaiter(id: UInt64) {
    guard let waiter = waiters.removeValue(forKey: id) else { return }
    waiter.continuation.resume(throwing: CancellationError())
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
