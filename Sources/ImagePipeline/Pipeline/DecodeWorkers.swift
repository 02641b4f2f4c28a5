import CImageCodecs
import CSystem
import Synchronization
import ThumbSystem

/// Dedicated threads for blocking codec work, fed from a bounded priority queue.
///
/// The cooperative pool has only as many threads as cores; a long libjpeg call there would
/// starve every other task. These threads pick the most urgent queued job each time one frees
/// up (reading priorities at that moment, so raised priorities reorder the queue). A job whose
/// consumer leaves while queued never starts; a running one gets its attempt's cancellation
/// flag raised and stops at the decoder's next check.
final class DecodeWorkers: @unchecked Sendable {
  // @unchecked: every mutable field below is guarded by `condition`.
  private final class Job {
    let id: UInt64
    let context: JobContext
    /// Runs the work once under the given attempt; resumes the caller unless the attempt was
    /// superseded or another already did. False when a background attempt ran out of time:
    /// the job then runs again on a foreground thread.
    let attempt: (Attempt) -> Bool
    let abandon: () -> Void
    let shed: () -> Void
    /// Run on a foreground thread whatever its priority: a background attempt ran past the
    /// decode deadline. At nice 19 on a busy machine, the deadline (wall clock) measures the
    /// wait for a CPU more than the decode, and a prefetch that failed so would be remembered
    /// as a failure and answered to the visible request that follows.
    var inForeground = false
    init(
      id: UInt64, context: JobContext, attempt: @escaping (Attempt) -> Bool,
      abandon: @escaping () -> Void, shed: @escaping () -> Void
    ) {
      self.id = id
      self.context = context
      self.attempt = attempt
      self.abandon = abandon
      self.shed = shed
    }
  }

  /// One run of a job on one thread. A prefetch job raised while it runs on a background
  /// thread is run again on a foreground one; the background attempt is superseded (its
  /// result, whatever it is, is dropped) and told to stop.
  final class Attempt: Sendable {
    /// Polled by the decoder.
    let cancellation = CancellationFlag()
    let background: Bool
    private let supersededFlag = Atomic<Bool>(false)

    init(background: Bool) { self.background = background }

    var isSuperseded: Bool { supersededFlag.load(ordering: .acquiring) }

    func supersede() {
      supersededFlag.store(true, ordering: .releasing)
      cancellation.cancel()
    }
  }

  /// Resumes a job's caller exactly once, whichever of attempt, abandon or shed gets there.
  private final class Once: Sendable {
    private let claimed = Atomic<Bool>(false)
    func claim() -> Bool { !claimed.exchange(true, ordering: .acquiringAndReleasing) }
  }

  private let condition = ConditionLock()
  /// Jobs waiting for a thread; a cancellation that comes before a job queues waits for it
  /// there.
  private var queue = WaiterList<Job>()
  /// Jobs on a thread, with their attempts (two while a promoted job's background attempt
  /// winds down).
  private var running: [UInt64: (job: Job, attempts: [Attempt])] = [:]
  /// Attempts running per client, so that among jobs of one priority the client with the
  /// fewest running goes first: one client's backlog cannot hold another's next image
  /// behind all of it (as `PriorityLimiter` does for fetches).
  private var runningByClient: [ClientID: Int] = [:]
  private var stopping = false
  /// Largest number of queued (not yet running) jobs. Past it, a job more urgent than the least
  /// urgent queued one takes its place (that one fails with `PipelineError.queueFull`); any
  /// other new job fails with `queueFull` itself. So a queue full of prefetch work never
  /// refuses what is on screen.
  let maxQueued: Int
  let threadCount: Int

  /// Starts `threads` foreground threads for visible and normal work and `backgroundThreads`
  /// (default: as many) for prefetch work. The background threads run at the lowest CPU
  /// priority (nice 19): on a saturated machine they get only a small share, so prefetch
  /// decodes barely slow visible work, yet on an idle machine they run at full speed. A queued
  /// job raised above prefetch moves to the foreground threads; a running one is started again
  /// there, because a nice 19 thread may wait long on a busy machine and cannot be raised
  /// without privilege.
  init(threads: Int, maxQueued: Int, backgroundThreads: Int? = nil) {
    self.threadCount = max(1, threads)
    self.maxQueued = max(1, maxQueued)
    let background = max(1, backgroundThreads ?? threadCount)
    for index in 0..<(threadCount + background) {
      let isBackground = index >= threadCount
      // Each thread keeps the workers alive until shutdown() lets it finish.
      let name = isBackground ? "prefetch-\(index - threadCount)" : "decode-\(index)"
      SystemThread.detach(name: name, stackSize: 1 << 20) {
        self.workLoop(background: isBackground)
      }
    }
  }

  /// Times a thread went back to sleep leaving jobs queued (all of the other kind): lets a test
  /// know a thread has looked at a job and passed it over before it changes that job.
  var passedOver: Int {
    condition.lock()
    defer { condition.unlock() }
    return passes
  }
  private var passes = 0

  /// Jobs waiting and jobs running.
  var load: (queued: Int, running: Int) {
    condition.lock()
    defer { condition.unlock() }
    return (queue.count, running.count)
  }

  /// Runs `work` on a worker thread when its turn comes. `work` gets the flag its decoder must
  /// poll; it may run twice (see `Attempt`), so it must have no effect beyond its result.
  /// `started` runs once, when the job first gets a thread, however many times it runs.
  func run<T: Sendable>(
    context: JobContext, started: (@Sendable () -> Void)? = nil,
    _ work: @escaping @Sendable (CancellationFlag) throws -> T
  ) async throws -> T {
    condition.lock()
    let id = queue.arrive()
    condition.unlock()
    // The listener holds the priority box, not the context: the context keeps its listeners,
    // and a listener holding the context would keep both alive for ever.
    let priority = context.priority
    context.onPriorityChange { [weak self] in self?.priorityChanged(id: id, priority: priority) }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<T, any Error>) in
        let once = Once()
        let first = Once()
        let job = Job(
          id: id, context: context,
          attempt: { attempt in
            if let started, first.claim() { started() }
            let result = Result { try work(attempt.cancellation) }
            if attempt.background, case .failure(let error) = result, Self.isTimeout(error) {
              return false
            }
            guard !attempt.isSuperseded, once.claim() else { return true }
            continuation.resume(with: result)
            return true
          },
          abandon: { if once.claim() { continuation.resume(throwing: CancellationError()) } },
          shed: { if once.claim() { continuation.resume(throwing: PipelineError.queueFull) } })
        condition.lock()
        if let error = queue.queue(id, job) {
          condition.unlock()
          continuation.resume(throwing: error)
          return
        }
        // Past the bound the least urgent queued job goes, this one if none is less urgent.
        let displaced = queue.count > maxQueued ? leastUrgent().flatMap { queue.remove($0) } : nil
        // Foreground and background threads wait on one condition: wake them all so the
        // right kind picks the job up.
        condition.broadcast()
        condition.unlock()
        displaced?.entry.shed()
      }
    } onCancel: {
      self.cancel(id: id)
    }
  }

  /// The queued job to shed first: the least urgent, and among those the newest (it has
  /// waited least). Called with the lock held.
  private func leastUrgent() -> UInt64? {
    queue.bestOfPairs { (-$0.entry.context.priority.value.rawValue, $0.id) }?.id
  }

  private func cancel(id: UInt64) {
    condition.lock()
    let queued = queue.leave(id, with: CancellationError())
    for attempt in running[id]?.attempts ?? [] { attempt.cancellation.cancel() }
    condition.unlock()
    // A job queued again after a promotion may also have a superseded attempt running, which
    // will not answer: abandoning answers (once) in its place.
    queued?.abandon()
  }

  /// A job's priority changed. Queued, it may now belong to the other kind of thread, which
  /// may be asleep: every thread is woken to look again (found by Examples/ListSimulation
  /// under load: a queued prefetch decode raised to visible waited, with every foreground
  /// thread idle, until another job happened to arrive; at the end of a scroll none did). Raised
  /// above prefetch while a background thread runs it: it is queued again for the foreground
  /// threads and the background attempt told to stop.
  private func priorityChanged(id: UInt64, priority: PriorityBox) {
    condition.lock()
    defer { condition.unlock() }
    if queue.byID[id] != nil {
      condition.broadcast()
      return
    }
    guard priority.value > .prefetch, let (job, attempts) = running[id],
      attempts.allSatisfy({ $0.background && !$0.isSuperseded })
    else { return }
    for attempt in attempts { attempt.supersede() }
    _ = queue.queue(job.id, job)
    condition.broadcast()
  }

  private func workLoop(background: Bool) {
    if background {
      ts_thread_background()
    }
    while runNext(background: background) {}
  }

  /// Waits for the next job of this thread's kind and runs it; false once shutting down with
  /// nothing left. The job lives only in this call: a loop variable outlived its iteration
  /// and kept each thread's last job (its closure, so the source's bytes) alive until the
  /// next one (measured: one source per decode thread stayed resident after a burst).
  private func runNext(background: Bool) -> Bool {
    condition.lock()
    var picked: Job?
    while true {
      picked = nextJob(background: background)
      // On shutdown a thread finishes the queued jobs of its kind, then exits.
      if picked != nil || stopping { break }
      if !queue.isEmpty { passes += 1 }
      condition.wait()
    }
    guard let job = picked else {
      condition.unlock()
      return false
    }
    let attempt = Attempt(background: background)
    running[job.id, default: (job, [])].attempts.append(attempt)
    let client = job.context.client
    runningByClient[client, default: 0] += 1
    condition.unlock()
    let finished = job.attempt(attempt)
    condition.lock()
    let remaining = (runningByClient[client] ?? 1) - 1
    runningByClient[client] = remaining > 0 ? remaining : nil
    running[job.id]?.attempts.removeAll { $0 === attempt }
    if running[job.id]?.attempts.isEmpty == true { running[job.id] = nil }
    var abandoned = false
    if !finished && !attempt.isSuperseded {
      if attempt.cancellation.isCancelled {
        abandoned = true
      } else {
        job.inForeground = true
        _ = queue.queue(job.id, job)
        condition.broadcast()
      }
    }
    condition.unlock()
    if abandoned { job.abandon() }
    return true
  }

  /// Whether `error` is the decode deadline passing.
  static func isTimeout(_ error: any Error) -> Bool {
    switch error {
    case ThumbnailError.timedOut, PipelineError.thumbnail(.timedOut): true
    default: false
    }
  }

  /// The most urgent queued job of this thread's kind (prefetch for background threads, the
  /// rest for foreground ones), or nil: highest priority, then the client with the fewest
  /// attempts running, then the oldest. Called with the lock held.
  private func nextJob(background: Bool) -> Job? {
    let best = queue.bestOfPairs { waiter -> (ImagePriority, Int)? in
      let job = waiter.entry
      let priority = job.context.priority.value
      guard (priority == .prefetch && !job.inForeground) == background else { return nil }
      return (priority, -runningByClient[job.context.client, default: 0])
    }
    return best.flatMap { queue.remove($0.id)?.entry }
  }

  /// Lets the threads finish the queue and exit.
  func shutdown() {
    condition.lock()
    stopping = true
    condition.broadcast()
    condition.unlock()
  }
}
