import Synchronization
import Testing

@testable import ImagePipeline
@testable import TestSupport

/// The memory budget's admission rules, driven deterministically: holds are taken and
/// released by the test, and waiters are observed through the budget's own figures.
@Suite("Memory budget")
struct MemoryBudgetTests {
  /// Records the order in which waiters were granted.
  final class Order: Sendable {
    private let names = Mutex<[String]>([])
    func append(_ name: String) { names.withLock { $0.append(name) } }
    var all: [String] { names.withLock { $0 } }
  }

  @Test("a job larger than the whole budget is refused at once, with too_large")
  func overBudget() async throws {
    let budget = MemoryBudget(limit: 100)
    await #expect(throws: PipelineError.overBudget(needed: 101, limit: 100)) {
      _ = try await budget.reserve(101, priority: PriorityBox(.visible))
    }
    #expect(PipelineError.overBudget(needed: 101, limit: 100).kind == "too_large")
    #expect(budget.snapshot.refusals == 1)
    // Exactly the budget is allowed.
    let hold = try await budget.reserve(100, priority: PriorityBox(.visible))
    #expect(budget.snapshot.work == 100)
    hold.release()
    #expect(budget.snapshot.work == 0)
  }

  @Test("big jobs run one at a time, and a visible one overtakes queued prefetch work")
  func orderAndOneAtATime() async throws {
    let budget = MemoryBudget(limit: 100)
    let order = Order()
    let first = try await budget.reserve(60, priority: PriorityBox(.normal))
    var tasks: [Task<Void, any Error>] = []
    for (index, name) in ["prefetch-1", "prefetch-2"].enumerated() {
      tasks.append(
        Task {
          let hold = try await budget.reserve(60, priority: PriorityBox(.prefetch))
          order.append(name)
          // Each holds until the test lets the next one in (see below).
          while budget.snapshot.waiting > 1 - index { await Task.yield() }
          hold.release()
        })
      await eventually("\(name) waits") { budget.snapshot.waiting == index + 1 }
    }
    let visible = Task {
      let hold = try await budget.reserve(60, priority: PriorityBox(.visible))
      order.append("visible")
      hold.release()
    }
    await eventually("the visible job waits") { budget.snapshot.waiting == 3 }
    #expect(order.all.isEmpty)
    #expect(budget.snapshot.waits == 3)
    first.release()
    try await visible.value
    for task in tasks { try await task.value }
    #expect(order.all == ["visible", "prefetch-1", "prefetch-2"])
    // Never two 60-byte jobs at once.
    #expect(budget.snapshot.peakWork == 60)
    #expect(budget.snapshot.work == 0)
  }

  @Test("the head of the queue is not overtaken by smaller work behind it")
  func noOvertakingTheHead() async throws {
    let budget = MemoryBudget(limit: 100)
    let held = try await budget.reserve(50, priority: PriorityBox(.normal))
    let big = Task { try await budget.reserve(80, priority: PriorityBox(.normal)) }
    await eventually("the big job waits") { budget.snapshot.waiting == 1 }
    let small = Task { try await budget.reserve(10, priority: PriorityBox(.normal)) }
    await eventually("the small job waits behind it") { budget.snapshot.waiting == 2 }
    held.release()
    let bigHold = try await big.value
    let smallHold = try await small.value
    #expect(budget.snapshot.work == 90)
    bigHold.release()
    smallHold.release()
  }

  @Test("a waiter that is cancelled leaves the queue, and the ones behind it move up")
  func cancelledWaiter() async throws {
    let budget = MemoryBudget(limit: 100)
    let held = try await budget.reserve(50, priority: PriorityBox(.normal))
    let big = Task { try await budget.reserve(80, priority: PriorityBox(.visible)) }
    await eventually("the big job waits") { budget.snapshot.waiting == 1 }
    let small = Task { try await budget.reserve(40, priority: PriorityBox(.normal)) }
    await eventually("the small job waits") { budget.snapshot.waiting == 2 }
    big.cancel()
    await #expect(throws: CancellationError.self) { _ = try await big.value }
    let smallHold = try await small.value
    #expect(budget.snapshot.work == 90)
    smallHold.release()
    held.release()
  }

  @Test(
    "sources that fill the budget cannot block their own decodes: once every source waits for one, one runs"
  )
  func decodesAlwaysProgress() async throws {
    let budget = MemoryBudget(limit: 100)
    // Two finished downloads whose decodes have not run: their bytes fill the budget.
    var sources = [budget.hold(45), budget.hold(45)]
    // A download at the head of the queue that does not fit either.
    let download = Task { try await budget.reserve(60, priority: PriorityBox(.visible)) }
    await eventually("the download waits") { budget.snapshot.waiting == 1 }
    // The first decode does not fit, and the other source is not waiting for a decode yet
    // (it may still be freed otherwise): it waits.
    let first = Task {
      try await budget.reserve(50, priority: PriorityBox(.normal), unblocks: true, holding: 45)
    }
    await eventually("the first decode waits") { budget.snapshot.waiting == 2 }
    #expect(budget.snapshot.work == 90)
    // Now every source held waits for a decode: one starts although it does not fit, ahead of
    // the download.
    let second = Task {
      try await budget.reserve(50, priority: PriorityBox(.normal), unblocks: true, holding: 45)
    }
    let firstHold = try await first.value
    #expect(budget.snapshot.work == 140)
    // While it runs, the next decode waits like any job.
    await eventually("the second decode waits") { budget.snapshot.waiting == 2 }
    // It ends, and frees its source: the second one fits.
    firstHold.release()
    sources.removeFirst().release()
    let secondHold = try await second.value
    #expect(budget.snapshot.work == 95 && budget.snapshot.waiting == 1)
    // The decodes free their sources; the download then fits.
    secondHold.release()
    sources.removeFirst().release()
    let downloadHold = try await download.value
    #expect(budget.snapshot.work == 60)
    downloadHold.release()
  }

  /// Issue 52's soak of large photos: with no decode running, the most urgent decode started
  /// over the limit even when a smaller one waiting would have fitted.
  @Test("with no decode running, a waiting decode that fits goes before one over the limit")
  func fittingDecodeFirst() async throws {
    let budget = MemoryBudget(limit: 100)
    let sources = budget.hold(50)
    let running = try await budget.reserve(20, priority: PriorityBox(.normal), unblocks: true)
    // The held source is the big decode's own.
    let big = Task {
      try await budget.reserve(80, priority: PriorityBox(.visible), unblocks: true, holding: 50)
    }
    await eventually("the big decode waits") { budget.snapshot.waiting == 1 }
    let small = Task {
      try await budget.reserve(30, priority: PriorityBox(.prefetch), unblocks: true)
    }
    await eventually("the small decode waits behind it") { budget.snapshot.waiting == 2 }
    // The running decode ends: the small one fits and goes; the big one still waits.
    running.release()
    await eventually("one of them goes") { budget.snapshot.waiting == 1 }
    let smallWent = budget.snapshot.work == 80
    #expect(smallWent, "not the big one, over the limit: \(budget.snapshot.work)")
    if smallWent {
      // Once it ends, nothing fits the big one and no decode runs: it goes over the limit.
      try await small.value.release()
      #expect(try await big.value.bytes == 80 && budget.snapshot.work == 130)
    } else {
      try await big.value.release()
    }
    try await big.value.release()
    try await small.value.release()
    sources.release()
  }

  /// Issue 52's soak of large photos: with whole bodies held for their decodes, sources filled
  /// the budget, and every decode then started over the limit.
  @Test(
    "sources fit in half the budget (one alone may take more); a decode behind a source kept out by that share goes"
  )
  func sourcesShare() async throws {
    let budget = MemoryBudget(limit: 100)
    let first = try await budget.reserve(40, priority: PriorityBox(.normal), source: true)
    let download = Task {
      try await budget.reserve(20, priority: PriorityBox(.visible), source: true)
    }
    await eventually("the download waits for the sources' share") {
      budget.snapshot.waiting == 1
    }
    #expect(budget.snapshot.work == 40)
    let decode = try await budget.reserve(30, priority: PriorityBox(.prefetch), unblocks: true)
    #expect(budget.snapshot.work == 70 && budget.snapshot.waiting == 1)
    first.release()
    let downloadHold = try await download.value
    #expect(budget.snapshot.work == 50)
    decode.release()
    downloadHold.release()
    // With no source held, one larger than the share still goes.
    let large = try await budget.reserve(90, priority: PriorityBox(.normal), source: true)
    #expect(budget.snapshot.work == 90)
    large.release()
  }

  @Test("widening a hold gives back its floor, waits for the whole, and charges it once")
  func widening() async throws {
    let budget = MemoryBudget(limit: 100)
    let other = try await budget.reserve(60, priority: PriorityBox(.normal))
    let download = try await budget.reserve(10, priority: PriorityBox(.visible))
    let widened = Task { try await download.widen(to: 50, priority: PriorityBox(.visible)) }
    await eventually("the widening waits, holding nothing") {
      budget.snapshot.waiting == 1 && budget.snapshot.work == 60
    }
    other.release()
    try await widened.value
    #expect(budget.snapshot.work == 50 && download.bytes == 50)
    download.count(40)
    #expect(budget.snapshot.work == 50, "bytes within the floor are not charged twice")
    download.settle()
    #expect(budget.snapshot.work == 40)
    download.release()
    #expect(budget.snapshot.work == 0)
    await #expect(throws: PipelineError.overBudget(needed: 101, limit: 100)) {
      try await budget.reserve(1, priority: PriorityBox(.normal)).widen(
        to: 101, priority: PriorityBox(.normal))
    }
    #expect(budget.snapshot.work == 0)
  }

  @Test("a hold counts what arrives beyond its floor, and settling drops the floor")
  func countingAndSettling() async throws {
    let budget = MemoryBudget(limit: 1000)
    let download = try await budget.reserve(100, priority: PriorityBox(.normal))
    download.count(60)
    #expect(budget.snapshot.work == 100)
    download.count(90)
    #expect(budget.snapshot.work == 150)
    download.settle()
    #expect(budget.snapshot.work == 150)
    download.count(-150)
    #expect(budget.snapshot.work == 0)
    download.release()
    download.release()
    #expect(budget.snapshot.work == 0)
    do {
      let dropped = budget.hold(70)
      #expect(budget.snapshot.work == 70 && dropped.bytes == 70)
    }
    // Deallocated: given back.
    #expect(budget.snapshot.work == 0)
  }

  /// Issue 52's soak: once every decoder had run, the process itself held 44 MiB, and RSS
  /// passed the budget by that much however well work was counted.
  @Test(
    "the process's own memory beyond its allowance takes room from work (at most half), and an idle reading gives it back"
  )
  func processMemory() async throws {
    let resident = Mutex(30)
    let cache = Mutex(5)
    let budget = MemoryBudget(
      limit: 100, cacheBytes: { cache.withLock { $0 } }, trimCache: { _ in },
      process: ProcessMemory(allowance: 10) { resident.withLock { $0 } })
    // At start: 30 resident, 5 of it the cache, 10 allowed: 15 is the process's.
    #expect(budget.snapshot.process == 15)
    let first = try await budget.reserve(30, priority: PriorityBox(.normal), unblocks: true)
    let second = try await budget.reserve(30, priority: PriorityBox(.normal), unblocks: true)
    // A decode ends while the libraries it loaded stay resident: of 80, the 30 still held
    // and the cache explain 35; 45 is 35 beyond the allowance, and work has 65.
    resident.withLock { $0 = 80 }
    first.release()
    #expect(budget.snapshot.process == 35)
    // 30 + 40 passes 65 (it would fit in 100): the third waits while a decode runs.
    let third = Task {
      try await budget.reserve(40, priority: PriorityBox(.visible), unblocks: true)
    }
    await eventually("the third waits") { budget.snapshot.waiting == 1 }
    #expect(budget.snapshot.work == 30)
    // The other ends: 75 unexplained, and the process's share stops at half the budget.
    second.release()
    let thirdHold = try await third.value
    #expect(budget.snapshot.process == 50 && budget.snapshot.work == 40)
    thirdHold.release()
    // Lower readings do not lower the high mark; a fresh one (after an idle trim) does.
    resident.withLock { $0 = 20 }
    budget.measureProcess(fresh: false)
    #expect(budget.snapshot.process == 50)
    budget.measureProcess(fresh: true)
    #expect(budget.snapshot.process == 5)
    // With nothing charged, a job up to the whole limit runs, however narrow the room;
    // only one over the limit is refused.
    resident.withLock { $0 = 300 }
    budget.measureProcess(fresh: true)
    let whole = try await budget.reserve(100, priority: PriorityBox(.normal), source: true)
    #expect(budget.snapshot.work == 100)
    whole.release()
    await #expect(throws: PipelineError.overBudget(needed: 101, limit: 100)) {
      _ = try await budget.reserve(101, priority: PriorityBox(.visible))
    }
  }

  @Test(
    "what the process will keep from a job is held with it, up to the limit, never a reason to refuse it"
  )
  func growth() async throws {
    let budget = MemoryBudget(limit: 100)
    let hold = try await budget.reserve(60, priority: PriorityBox(.normal), growth: 25)
    #expect(budget.snapshot.work == 85)
    hold.release()
    let capped = try await budget.reserve(90, priority: PriorityBox(.normal), growth: 25)
    #expect(budget.snapshot.work == 100 && budget.snapshot.refusals == 0)
    capped.release()
  }

  @Test("a budget without a process reading counts work alone")
  func noProcessMemory() async throws {
    let budget = MemoryBudget(limit: 100)
    #expect(budget.snapshot.process == 0)
    let hold = try await budget.reserve(100, priority: PriorityBox(.normal))
    budget.measureProcess(fresh: false)
    #expect(budget.snapshot.process == 0 && budget.snapshot.work == 100)
    hold.release()
  }

  @Test("the memory cache gives way to work")
  func cacheGivesWay() async throws {
    let cache = MemoryCache<Int, Int>(costLimit: 1000, countLimit: 100)
    for key in 0..<8 { cache.setValue(key, forKey: key, cost: 100) }
    let budget = MemoryBudget(
      limit: 1000, cacheBytes: { cache.statistics.totalCost }, trimCache: { cache.trim(toCost: $0) }
    )
    let hold = try await budget.reserve(500, priority: PriorityBox(.visible))
    #expect(cache.statistics.totalCost <= 500)
    // The oldest went first.
    #expect(!cache.contains(0) && cache.contains(7))
    hold.release()
  }

  @Test("the listener hears work start and stop, once each way, however the bytes come and go")
  func activityReported() async throws {
    let heard = Mutex<[Bool]>([])
    let budget = MemoryBudget(
      limit: 100, onActivity: { idle in heard.withLock { $0.append(idle) } })
    let reserved = try await budget.reserve(10, priority: PriorityBox(.visible))
    reserved.count(30)
    reserved.count(-30)
    let held = budget.hold(5)
    #expect(
      heard.withLock { $0 } == [false], "started once; counting and a second hold are no change")
    reserved.release()
    #expect(heard.withLock { $0 } == [false], "the hold still counts")
    held.release()
    #expect(heard.withLock { $0 } == [false, true])
    budget.hold(1).release()
    #expect(heard.withLock { $0 } == [false, true, false, true])
  }
}
