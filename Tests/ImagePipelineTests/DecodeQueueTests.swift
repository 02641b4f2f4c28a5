import Foundation
import Synchronization
import Testing

@testable import ImagePipeline
@testable import TestSupport

/// The decode queue serves the most urgent job first, reading priorities when a thread frees.
@Suite("Decode queue")
struct DecodeQueueTests {
  /// Stands for a job's captured source bytes.
  final class Payload: Sendable {}

  @Test("a finished job's closure (and what it captured) is released while the thread waits")
  func finishedJobIsReleased() async throws {
    let workers = DecodeWorkers(threads: 1, maxQueued: 16, backgroundThreads: 1)
    defer { workers.shutdown() }
    for priority in [ImagePriority.visible, .prefetch] {
      weak var released: Payload?
      do {
        let payload = Payload()
        released = payload
        try await workers.run(context: JobContext(priority: priority)) { _ in
          withExtendedLifetime(payload) {}
        }
      }
      // The thread now waits for its next job, holding nothing of the last one: it used to
      // keep it (and so a source's bytes) until another job came.
      await eventually("the \(priority) thread let go of its last job") { released == nil }
    }
  }

  @Test(
    "a prefetch decode that runs out of time at background priority runs again in the foreground, not failing"
  )
  func backgroundTimeoutRetriedInForeground() async throws {
    let workers = DecodeWorkers(threads: 1, maxQueued: 16, backgroundThreads: 1)
    defer { workers.shutdown() }
    // Each run records its thread's nice value; the first, on the background thread, stands
    // for a decode starved past its deadline.
    let nices = Recorder<Int32>()
    let value = try await workers.run(context: JobContext(priority: .prefetch)) {
      _ -> Int in
      // On Linux, PRIO_PROCESS with 0 reads the calling thread's own nice value.
      nices.append(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
      if nices.values.count == 1 {
        throw ThumbnailError.timedOut("the decode took longer than its deadline")
      }
      return 7
    }
    #expect(value == 7)
    #expect(nices.values == [19, 0], "background first, then a foreground thread")
    // A timeout on a foreground thread is the answer: it is not run a third time.
    let counted = Recorder<Int>()
    await #expect(throws: ThumbnailError.timedOut("x")) {
      try await workers.run(context: JobContext(priority: .visible)) { _ -> Int in
        counted.append(1)
        throw ThumbnailError.timedOut("x")
      }
    }
    #expect(counted.values.count == 1)
  }

  @Test("a visible job runs before queued normal work; a raised prefetch job moves to the front")
  func visibleFirst() async throws {
    let workers = DecodeWorkers(threads: 1, maxQueued: 16, backgroundThreads: 1)
    defer { workers.shutdown() }
    let order = Recorder<String>()
    let gate = DispatchSemaphore(value: 0)
    let backgroundGate = DispatchSemaphore(value: 0)
    let blocker = Task {
      try await workers.run(context: JobContext(priority: .visible)) { _ in
        gate.wait()
        order.append("blocker")
      }
    }
    // The background thread is busy too, so queued prefetch work stays queued.
    let backgroundBlocker = Task {
      try await workers.run(context: JobContext(priority: .prefetch)) { _ in
        backgroundGate.wait()
      }
    }
    await eventually("both threads busy") { workers.load.running == 2 }
    var contexts: [JobContext] = []
    var jobs: [Task<Void, any Error>] = []
    for i in 0..<5 {
      let context = JobContext(priority: i == 3 ? .prefetch : .normal)
      contexts.append(context)
      jobs.append(
        Task {
          try await workers.run(context: context) { _ in order.append("n\(i)") }
        })
      await eventually("n\(i) queued") { workers.load.queued == i + 1 }
    }
    jobs.append(
      Task {
        try await workers.run(context: JobContext(priority: .visible)) { _ in
          order.append("visible")
        }
      })
    await eventually("visible queued") { workers.load.queued == 6 }
    // n3 waits for the background thread, until a visible consumer joins it.
    contexts[3].setPriority(.visible)
    gate.signal()
    try await blocker.value
    for job in jobs { try await job.value }
    #expect(order.values == ["blocker", "n3", "visible", "n0", "n1", "n2", "n4"])
    backgroundGate.signal()
    try await backgroundBlocker.value
  }

  @Test(
    "among jobs of one priority, the client with the fewest running goes first: one client's backlog does not hold another's next image"
  )
  func fairBetweenClients() async throws {
    let workers = DecodeWorkers(threads: 2, maxQueued: 16, backgroundThreads: 1)
    defer { workers.shutdown() }
    let order = Recorder<String>()
    let (noisy, quiet) = (ClientID(1), ClientID(2))
    let gates = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
    var jobs: [Task<Void, any Error>] = []
    func submit(_ name: String, _ id: UInt64, _ client: ClientID, gate: DispatchSemaphore? = nil) {
      jobs.append(
        Task {
          try await workers.run(context: JobContext(priority: .visible, client: client)) {
            _ in
            gate?.wait()
            order.append(name)
          }
        })
    }
    submit("a1", 1, noisy, gate: gates[0])
    submit("a2", 2, noisy, gate: gates[1])
    await eventually("both threads run the noisy client's jobs") { workers.load.running == 2 }
    submit("a3", 3, noisy)
    await eventually("a3 queued") { workers.load.queued == 1 }
    submit("a4", 4, noisy)
    await eventually("a4 queued") { workers.load.queued == 2 }
    submit("b1", 5, quiet)
    await eventually("b1 queued") { workers.load.queued == 3 }
    gates[0].signal()
    await eventually("the freed thread ran the queue") { order.values.count == 4 }
    gates[1].signal()
    for job in jobs { try await job.value }
    // The noisy client still had a2 running; the quiet one had none: b1 went first.
    #expect(order.values == ["a1", "b1", "a3", "a4", "a2"])
  }

  @Test("a full queue sheds its newest least urgent job for a more urgent one, never the reverse")
  func shedsLeastUrgent() async throws {
    let workers = DecodeWorkers(threads: 1, maxQueued: 2, backgroundThreads: 1)
    defer { workers.shutdown() }
    let gate = DispatchSemaphore(value: 0)
    let ran = Recorder<String>()
    let blocker = Task {
      try await workers.run(context: JobContext(priority: .normal)) { _ in gate.wait() }
    }
    let backgroundBlocker = Task {
      try await workers.run(context: JobContext(priority: .prefetch)) { _ in gate.wait() }
    }
    await eventually("both threads busy") { workers.load.running == 2 }
    func submit(_ name: String, _ id: UInt64, _ priority: ImagePriority) -> Task<Void, any Error> {
      Task {
        try await workers.run(context: JobContext(priority: priority)) { _ in
          ran.append(name)
        }
      }
    }
    let old = submit("old prefetch", 2, .prefetch)
    await eventually("queued") { workers.load.queued == 1 }
    let new = submit("new prefetch", 3, .prefetch)
    await eventually("queue full") { workers.load.queued == 2 }
    // Another prefetch job finds the queue full of equals: it is refused itself.
    await #expect(throws: PipelineError.queueFull) { try await submit("third", 4, .prefetch).value }
    // A visible job displaces the newest prefetch job.
    let visible = submit("visible", 5, .visible)
    await #expect(throws: PipelineError.queueFull) { try await new.value }
    gate.signal()
    gate.signal()
    try await blocker.value
    try await backgroundBlocker.value
    try await visible.value
    try await old.value
    // Each ran on its own kind of thread; the shed and the refused job never ran.
    #expect(Set(ran.values) == ["visible", "old prefetch"] && ran.values.count == 2)
  }

  @Test("prefetch work runs on background threads: visible work never waits for it")
  func prefetchLeavesAThread() async throws {
    let workers = DecodeWorkers(threads: 1, maxQueued: 16, backgroundThreads: 1)
    defer { workers.shutdown() }
    let gate = DispatchSemaphore(value: 0)
    let ran = Recorder<String>()
    let prefetches = (0..<3).map { index in
      Task {
        try await workers.run(context: JobContext(priority: .prefetch)) {
          _ in
          gate.wait()
          ran.append("prefetch")
        }
      }
    }
    await eventually("one prefetch running, two waiting") {
      workers.load.running == 1 && workers.load.queued == 2
    }
    // The foreground thread is free, and takes visible work at once, while prefetch blocks.
    try await workers.run(context: JobContext(priority: .visible)) { _ in
      ran.append("visible")
    }
    #expect(ran.values == ["visible"])
    for _ in 0..<3 { gate.signal() }
    for task in prefetches { try await task.value }
    #expect(ran.values.count == 4)
  }

  @Test("a full queue refuses with queueFull, and a queued job whose consumer leaves never runs")
  func boundsAndCancellation() async throws {
    let workers = DecodeWorkers(threads: 1, maxQueued: 2)
    defer { workers.shutdown() }
    let gate = DispatchSemaphore(value: 0)
    let ran = Recorder<Int>()
    let blocker = Task {
      try await workers.run(context: JobContext(priority: .normal)) { _ in gate.wait() }
    }
    await eventually("blocker running") { workers.load.running == 1 }
    let queued = (2...3).map { id in
      Task {
        try await workers.run(context: JobContext(priority: .normal)) { _ in
          ran.append(id)
        }
      }
    }
    await eventually("two queued") { workers.load.queued == 2 }
    // Nothing queued is less urgent than a new normal job: it is refused.
    await #expect(throws: PipelineError.queueFull) {
      try await workers.run(context: JobContext(priority: .normal)) { _ in }
    }
    queued[0].cancel()
    await #expect(throws: CancellationError.self) { try await queued[0].value }
    gate.signal()
    try await blocker.value
    try await queued[1].value
    #expect(ran.values == [3])
  }

  @Test(
    "a queued prefetch job raised to visible runs on an idle foreground thread at once, with no other job arriving to wake it",
    .timeLimit(.minutes(1))
  )
  func raisedQueuedJobWakesForeground() async throws {
    let workers = DecodeWorkers(threads: 1, maxQueued: 16, backgroundThreads: 1)
    defer { workers.shutdown() }
    // The background thread is busy, so the prefetch job stays queued; the foreground thread
    // is idle, asleep.
    let backgroundGate = DispatchSemaphore(value: 0)
    let backgroundBlocker = Task {
      try await workers.run(context: JobContext(priority: .prefetch)) { _ in
        backgroundGate.wait()
      }
    }
    await eventually("the background thread busy") { workers.load.running == 1 }
    // From here the queue is empty until the job below: a pass over it is over that job.
    let passes = workers.passedOver
    let context = JobContext(priority: .prefetch)
    let ran = Recorder<String>()
    let raised = Task {
      try await workers.run(context: context) { _ in ran.append("raised") }
    }
    await eventually("queued") { workers.load.queued == 1 }
    // The foreground thread has looked at it (a prefetch job, not its kind) and gone back to
    // sleep.
    await eventually("passed over") { workers.passedOver > passes }
    // A visible consumer joins it: the foreground thread must take it now. Without a wake-up
    // it waited until some other job arrived.
    context.setPriority(.visible)
    try await raised.value
    #expect(ran.values == ["raised"])
    backgroundGate.signal()
    try await backgroundBlocker.value
  }

  @Test(
    "a prefetch job raised while a background thread runs it is run again in the foreground, and counted as started once"
  )
  func raisedRunningJobMoves() async throws {
    let workers = DecodeWorkers(threads: 1, maxQueued: 16, backgroundThreads: 1)
    defer { workers.shutdown() }
    let gate = DispatchSemaphore(value: 0)
    let backgroundFlag = Mutex<CancellationFlag?>(nil)
    let attempts = Recorder<String>()
    let context = JobContext(priority: .prefetch)
    let starts = Recorder<Bool>()
    let job = Task {
      try await workers.run(context: context, started: { starts.append(true) }) { cancellation in
        // Prefetch work only ever starts on the background thread: the first attempt is there.
        if attempts.values.isEmpty {
          attempts.append("background")
          backgroundFlag.withLock { $0 = cancellation }
          // An idle-priority thread that never gets the CPU back, as on a busy machine.
          gate.wait()
          return "background"
        }
        attempts.append("foreground")
        return "foreground"
      }
    }
    await eventually("running in the background") { backgroundFlag.withLock { $0 != nil } }
    context.setPriority(.visible)
    // The caller gets the foreground attempt's result while the background one still blocks,
    // and the background attempt was told to stop.
    #expect(try await job.value == "foreground")
    #expect(backgroundFlag.withLock { $0?.isCancelled } == true)
    gate.signal()
    await eventually("background attempt ended") { workers.load.running == 0 }
    #expect(attempts.values == ["background", "foreground"])
    // Run twice, started once (what thumbd_desktop_jobs_total counts).
    #expect(starts.values.count == 1)
  }

  @Test(
    "prefetch downloads take at most three quarters of the free slots and never keep visible ones waiting"
  )
  func fetchSlotsForVisibleWork() async throws {
    let limiter = PriorityLimiter(limit: 4)
    let prefetch = PriorityBox(.prefetch)
    var prefetchGrants: [PriorityLimiter.Grant] = []
    for _ in 1...3 {
      let grant = try await limiter.acquire(priority: prefetch)
      #expect(grant.prefetch)
      prefetchGrants.append(grant)
    }
    // The fourth prefetch waits although a slot is free...
    let waiting = Task { try await limiter.acquire(priority: prefetch) }
    await eventually("fourth prefetch waiting") { limiter.queued == 1 }
    // ...which a visible download takes at once. (Each from a client of its own: one client
    // may hold only three of the four; see the fairness tests.)
    var visibleGrants: [PriorityLimiter.Grant] = []
    let first = try await limiter.acquire(priority: PriorityBox(.visible), client: ClientID(5))
    #expect(first.prefetch == false)
    visibleGrants.append(first)
    #expect(limiter.active == 4)
    // Prefetch slots never keep visible downloads waiting: four of them run beside the three
    // prefetch downloads; a fifth waits.
    for id in 6...8 {
      let grant = try await limiter.acquire(
        priority: PriorityBox(.visible), client: ClientID(UInt64(id)))
      #expect(grant.prefetch == false)
      visibleGrants.append(grant)
    }
    #expect(limiter.active == 7)
    let fifth = Task {
      try await limiter.acquire(priority: PriorityBox(.visible), client: ClientID(9))
    }
    await eventually("fifth visible waiting") { limiter.queued == 2 }
    // A visible download ending lets the visible waiter in, not the prefetch one.
    limiter.release(visibleGrants.removeFirst())
    let fifthGrant = try await fifth.value
    #expect(fifthGrant.prefetch == false)
    for grant in visibleGrants + [fifthGrant] { limiter.release(grant) }
    limiter.release(prefetchGrants[0])
    #expect(try await waiting.value.prefetch == true)
    #expect(limiter.queued == 0)
  }
}
