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
    let continuation: CheckedContinuation<Void, any Error>
  }

  let limit: Int
  private(set) var active = 0
  private var waiters: [Waiter] = []
  private var nextSequence: UInt64 = 0

  init(limit: Int) { self.limit = max(1, limit) }

  /// Jobs waiting for a slot.
  var queued: Int { waiters.count }

  /// Waits for a slot. Throws `CancellationError` if the task is cancelled while waiting.
  func acquire(id: UInt64, priority: PriorityBox) async throws {
    try Task.checkCancellation()
    if active < limit && waiters.isEmpty {
      active += 1
      return
    }
    nextSequence += 1
    let sequence = nextSequence
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        waiters.append(
          Waiter(id: id, sequence: sequence, priority: priority, continuation: continuation))
      }
    } onCancel: {
      Task { await self.cancelWaiter(id: id) }
    }
  }

  /// Gives a slot back and hands it to the most urgent waiter.
  func release() {
    guard let best = mostUrgentWaiter() else {
      active -= 1
      return
    }
    waiters.remove(at: best).continuation.resume()
  }

  private func mostUrgentWaiter() -> Int? {
    guard !waiters.isEmpty else { return nil }
    var best = 0
    var bestPriority = waiters[0].priority.value
    for i in waiters.indices.dropFirst() {
      let p = waiters[i].priority.value
      if p > bestPriority { (best, bestPriority) = (i, p) }
    }
    return best
  }

  private func cancelWaiter(id: UInt64) {
    guard let i = waiters.firstIndex(where: { $0.id == id }) else { return }
    waiters.remove(at: i).continuation.resume(throwing: CancellationError())
  }
}
