import Foundation
import Synchronization
import Testing

@testable import ImagePipeline
@testable import TestSupport

/// The waiting half every queue shares (`WaiterList`, `PriorityWaiters`), and every queue built
/// on it driven through the same races: a cancellation before the waiter queued, one while it
/// waits, and one racing its turn. Each must answer the waiter once, at once, and leave the
/// queue's capacity as it was.
@Suite("Wait queues")
struct WaitQueueTests {
  struct Left: Error {}

  @Test(
    "a waiter that leaves before it queues is refused when it queues; one answered is left alone")
  func leaveBeforeQueue() {
    var list = WaiterList<String>()
    let early = list.arrive()
    #expect(list.leave(early, with: Left()) == nil, "not queued yet: nothing to answer")
    #expect(list.queue(early, "early") is Left, "the leave waits for it and refuses it")
    #expect(list.isEmpty)
    let late = list.arrive()
    #expect(list.queue(late, "late") == nil)
    #expect(list.remove(late)?.entry == "late")
    #expect(list.leave(late, with: Left()) == nil, "answered already: nothing to do")
    #expect(list.pendingLeaves == 0, "and nothing kept for it")
    let queued = list.arrive()
    #expect(list.queue(queued, "queued") == nil)
    #expect(list.leave(queued, with: Left()) == "queued")
    #expect(list.isEmpty)
  }

  @Test("the best waiter is the highest rank, the oldest among equals; unranked ones wait")
  func bestIsOldestOfHighest() {
    var list = WaiterList<Int>()
    for rank in [1, 3, 2, 3, 0] {
      #expect(list.queue(list.arrive(), rank) == nil)
    }
    #expect(list.best(by: { $0.entry })?.id == 2)
    #expect(list.best(by: { $0.entry == 3 ? nil : $0.entry })?.id == 3)
    #expect(list.best(by: { _ in Int?.none }) == nil)
    #expect(list.bestOfPairs(by: { ($0.entry % 2, -$0.entry) })?.id == 1, "two-part ranks")
  }

  /// One queue with a single place: `occupy` takes it, `wait` waits for it.
  struct Subject: Sendable, CustomTestStringConvertible {
    let testDescription: String
    /// Takes the place; the closure gives it back.
    let occupy: @Sendable () async throws -> @Sendable () -> Void
    /// Waits for the place; the closure gives it back.
    let wait: @Sendable () async throws -> @Sendable () -> Void
    /// Waiters queued now.
    let waiting: @Sendable () -> Int
  }

  static let subjects: [@Sendable () -> Subject] = [
    {
      let budget = MemoryBudget(limit: 100)
      let take: @Sendable () async throws -> @Sendable () -> Void = {
        let hold = try await budget.reserve(100, priority: PriorityBox(.visible))
        return { hold.release() }
      }
      return Subject(
        testDescription: "memory budget", occupy: take, wait: take,
        waiting: { budget.snapshot.waiting })
    },
    {
      let limiter = PriorityLimiter(limit: 1)
      let take: @Sendable () async throws -> @Sendable () -> Void = {
        let grant = try await limiter.acquire(priority: PriorityBox(.visible))
        return { limiter.release(grant) }
      }
      return Subject(
        testDescription: "fetch slots", occupy: take, wait: take, waiting: { limiter.queued })
    },
    {
      let admission = PrefetchAdmission(limit: 1)
      let take: @Sendable () async throws -> @Sendable () -> Void = {
        let placed = try await admission.enter(
          id: 0, client: .shared, priority: PriorityBox(.prefetch))
        #expect(placed)
        return { admission.leave(client: .shared) }
      }
      return Subject(
        testDescription: "prefetch admission", occupy: take, wait: take,
        waiting: { admission.queued })
    },
    {
      // The place is the one foreground thread: the occupier's job holds it until released.
      let workers = DecodeWorkers(threads: 1, maxQueued: 1024, backgroundThreads: 1)
      return Subject(
        testDescription: "decode threads",
        occupy: {
          let gate = DispatchSemaphore(value: 0)
          let started = DispatchSemaphore(value: 0)
          Task {
            try await workers.run(context: JobContext(priority: .visible)) { _ in
              started.signal()
              gate.wait()
            }
          }
          try await offPool { started.wait() }
          return { gate.signal() }
        },
        wait: {
          try await workers.run(context: JobContext(priority: .visible)) { _ in }
          return {}
        },
        waiting: { workers.load.queued })
    },
    {
      // The place is the one lookup thread: the lookup of "held" runs until released (its
      // caller has left; the lookup goes on).
      let gate = DispatchSemaphore(value: 0)
      let resolver = SystemResolver(maxThreads: 1, maxQueued: 1024, cacheSeconds: 0) { host in
        if host == "held.test" { gate.wait() }
        return .success([IPAddress("127.0.0.1")!])
      }
      return Subject(
        testDescription: "name lookups",
        occupy: {
          let caller = Task { _ = try await resolver.addresses(of: "held.test", timeout: 600) }
          await eventually("the lookup thread is busy") { resolver.lookupsRunning == 1 }
          caller.cancel()
          await eventually("its caller left") { resolver.waitingCount == 0 }
          return { gate.signal() }
        },
        wait: {
          _ = try await resolver.addresses(of: "next.test", timeout: 600)
          return {}
        },
        waiting: { resolver.waitingCount })
    },
  ]

  static let cases = subjects.indices.map { Case(index: $0) }

  struct Case: Sendable, CustomTestStringConvertible {
    let index: Int
    var subject: Subject { WaitQueueTests.subjects[index]() }
    var testDescription: String { subject.testDescription }
  }

  @Test(
    "every queue: cancelled before or while waiting, a waiter is answered at once and the place is kept",
    arguments: cases)
  func cancellationRaces(_ testCase: Case) async throws {
    let subject = testCase.subject
    let release = try await subject.occupy()
    // A child of a cancelled group starts cancelled: its handler runs before it queues.
    for _ in 0..<10 {
      let outcome = await within(30) {
        try await withThrowingTaskGroup(of: Void.self) { group in
          group.cancelAll()
          group.addTask { _ = try await subject.wait() }
          try await group.next()
        }
      }
      #expect(throws: CancellationError.self, "\(subject.testDescription)") { try outcome?.get() }
    }
    // Cancelled while it waits.
    let waiter = Task { try await subject.wait() }
    await eventually("\(subject.testDescription): queued") { subject.waiting() == 1 }
    waiter.cancel()
    let cancelled = await within(30) { try await waiter.value }
    #expect(cancelled != nil, "\(subject.testDescription): answered at once")
    #expect(throws: CancellationError.self) { _ = try cancelled?.get() }
    #expect(subject.waiting() == 0)
    // Cancellations racing the place's release, at every moment: each waiter is answered once,
    // with the place or with its cancellation, and a given place is given back.
    release()
    for round in 0..<50 {
      let racer = Task { try await subject.wait() }
      if round % 2 == 0 { await Task.yield() }
      racer.cancel()
      if case .success(let giveBack)? = await within(30, { try await racer.value }) {
        giveBack()
      }
    }
    // The place is still there: nobody leaked it.
    let last = await within(30) { try await subject.wait() }
    #expect(last != nil, "\(subject.testDescription): the place was lost to a cancelled waiter")
    try last?.get()()
    #expect(subject.waiting() == 0)
  }
}
