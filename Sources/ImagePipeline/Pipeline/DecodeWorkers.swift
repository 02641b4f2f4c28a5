import CImageCodecs
import Foundation

/// Dedicated threads for blocking codec work, fed from a bounded priority queue.
///
/// The cooperative pool has only as many threads as cores; a long libjpeg call there would
/// starve every other task. These threads pick the most urgent queued job each time one frees
/// up (reading priorities at that moment, so raised priorities reorder the queue). A job whose
/// consumer leaves while queued never starts; a running one gets its cancellation flag raised
/// and stops at the decoder's next check.
final class DecodeWorkers: @unchecked Sendable {
  // @unchecked: every mutable field below is guarded by `condition`.
  private final class Job {
    let id: UInt64
    let sequence: UInt64
    let context: JobContext
    let body: () -> Void
    let abandon: () -> Void
    let shed: () -> Void
    init(
      id: UInt64, sequence: UInt64, context: JobContext, body: @escaping () -> Void,
      abandon: @escaping () -> Void, shed: @escaping () -> Void
    ) {
      self.id = id
      self.sequence = sequence
      self.context = context
      self.body = body
      self.abandon = abandon
      self.shed = shed
    }
  }

  private let condition = NSCondition()
  private var queue: [Job] = []
  private var running: [UInt64: JobContext] = [:]
  private var nextSequence: UInt64 = 0
  private var stopping = false
  private var threads: [Thread] = []
  /// Largest number of queued (not yet running) jobs. Past it, a job more urgent than the least
  /// urgent queued one takes its place (that one fails with `PipelineError.queueFull`); any
  /// other new job fails with `queueFull` itself. So a queue full of prefetch work never
  /// refuses what is on screen.
  let maxQueued: Int
  let threadCount: Int

  /// Starts `threads` foreground threads for visible and normal work and `backgroundThreads`
  /// (default: as many) for prefetch work. The background threads run at the lowest CPU
  /// priority (nice 19): when the machine is saturated, prefetch decodes get only what visible
  /// work leaves, yet on an idle machine they run at full speed. A queued job raised above
  /// prefetch moves to the foreground threads.
  init(threads: Int, maxQueued: Int, backgroundThreads: Int? = nil) {
    self.threadCount = max(1, threads)
    self.maxQueued = max(1, maxQueued)
    let background = max(1, backgroundThreads ?? threadCount)
    for index in 0..<(threadCount + background) {
      let isBackground = index >= threadCount
      // Each thread keeps the workers alive until shutdown() lets it finish.
      let thread = Thread { self.workLoop(background: isBackground) }
      thread.name =
        isBackground ? "thumbd-prefetch-\(index - threadCount)" : "thumbd-decode-\(index)"
      thread.stackSize = 1 << 20
      self.threads.append(thread)
      thread.start()
    }
  }

  /// Jobs waiting and jobs running.
  var load: (queued: Int, running: Int) {
    condition.lock()
    defer { condition.unlock() }
    return (queue.count, running.count)
  }

  /// Runs `work` on a worker thread when its turn comes.
  func run<T: Sendable>(
    id: UInt64, context: JobContext, _ work: @escaping @Sendable () throws -> T
  ) async throws -> T {
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<T, any Error>) in
        condition.lock()
        var displaced: Job?
        if queue.count >= maxQueued {
          guard let victim = leastUrgent(), victim.priority < context.priority.value else {
            condition.unlock()
            continuation.resume(throwing: PipelineError.queueFull)
            return
          }
          displaced = queue.remove(at: victim.index)
        }
        nextSequence += 1
        queue.append(
          Job(
            id: id, sequence: nextSequence, context: context,
            body: { continuation.resume(with: Result { try work() }) },
            abandon: { continuation.resume(throwing: CancellationError()) },
            shed: { continuation.resume(throwing: PipelineError.queueFull) }))
        // Foreground and background threads wait on one condition: wake them all so the
        // right kind picks the job up.
        condition.broadcast()
        condition.unlock()
        displaced?.shed()
      }
    } onCancel: {
      self.cancel(id: id)
    }
  }

  /// The queued job to shed first: the least urgent, and among those the newest (it has
  /// waited least). Called with the lock held.
  private func leastUrgent() -> (index: Int, priority: ImagePriority)? {
    guard var worst = queue.indices.first else { return nil }
    for i in queue.indices.dropFirst() {
      let candidate = queue[i].context.priority.value
      let current = queue[worst].context.priority.value
      if candidate < current || (candidate == current && queue[i].sequence > queue[worst].sequence)
      {
        worst = i
      }
    }
    return (worst, queue[worst].context.priority.value)
  }

  private func cancel(id: UInt64) {
    condition.lock()
    if let i = queue.firstIndex(where: { $0.id == id }) {
      let job = queue.remove(at: i)
      condition.unlock()
      job.abandon()
      return
    }
    running[id]?.cancellation.cancel()
    condition.unlock()
  }

  private func workLoop(background: Bool) {
    if background {
      ic_thread_background()
    }
    while true {
      condition.lock()
      var picked: Int?
      while true {
        picked = nextJobIndex(background: background)
        // On shutdown a thread finishes the queued jobs of its kind, then exits.
        if picked != nil || stopping { break }
        condition.wait()
      }
      guard let index = picked else {
        condition.unlock()
        return
      }
      let job = queue.remove(at: index)
      running[job.id] = job.context
      condition.unlock()
      job.body()
      condition.lock()
      running[job.id] = nil
      condition.unlock()
    }
  }

  /// The most urgent queued job of this thread's kind (prefetch for background threads, the
  /// rest for foreground ones), or nil. Called with the lock held.
  private func nextJobIndex(background: Bool) -> Int? {
    var best: Int?
    for i in queue.indices {
      let priority = queue[i].context.priority.value
      guard (priority == .prefetch) == background else { continue }
      if best == nil || priority > queue[best!].context.priority.value { best = i }
    }
    return best
  }

  /// Lets the threads finish the queue and exit.
  func shutdown() {
    condition.lock()
    stopping = true
    condition.broadcast()
    condition.unlock()
  }
}
