import Foundation
import Synchronization
import Testing

/// A task executor with threads of its own, outside the cooperative pool.
///
/// The test process's cooperative pool has a thread per core (two on the CI machine), and a
/// test that decodes synchronously holds one for as long as it decodes. Tests that run on a
/// lane (`.onLane(_:)`) hold the lane's threads instead: the cooperative threads stay free
/// for the in-process pipelines, event loops and `eventually` waits of every other test.
/// Jobs run in the order they arrive.
final class ThreadLane: TaskExecutor {
  /// The corpus and decoder suites (`DecodeSuites`): a thread for each of their two groups.
  static let decoding = ThreadLane(threads: 2, name: "test-decoding")

  /// Suites whose tests block a thread (blocking clients such as `SocketClient`, a sandbox's
  /// blocking run): they wait on these threads while daemons, in-process or not, and origins
  /// work, and the cooperative pool stays free for the tasks an in-process daemon starts
  /// (which do not inherit a test's lane; `PoolGuard` fails a test that blocks the pool).
  /// Two, the CI machine's cores, as many blocking tests as the pool let run before they
  /// moved here: more run more tests at once than two cores serve, and timing tests (a
  /// visible photo answered within 1 s beside hostile clients) failed with four.
  static let clients = ThreadLane(threads: 2, name: "test-clients")

  private let jobs = Mutex<[UnownedJob]>([])
  /// The lane's threads.
  private let threadIDs = Mutex<Set<pthread_t>>([])
  private let queued = DispatchSemaphore(value: 0)

  /// `threads` threads named `name`, started now; they live as long as the process.
  init(threads: Int, name: String) {
    for _ in 0..<max(1, threads) {
      let thread = Thread { [self] in run() }
      thread.name = name
      thread.start()
    }
  }

  /// Whether the caller runs on one of the lane's threads.
  func runsCaller() -> Bool {
    let caller = pthread_self()
    return threadIDs.withLock { $0.contains(caller) }
  }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    jobs.withLock { $0.append(job) }
    queued.signal()
  }

  private func run() {
    let id = pthread_self()
    threadIDs.withLock { _ = $0.insert(id) }
    while true {
      queued.wait()
      let job = jobs.withLock { $0.removeFirst() }
      job.runSynchronously(on: asUnownedTaskExecutor())
    }
  }
}

/// Runs a suite's tests (all of them, nested suites too) or one test on a `ThreadLane`.
struct OnLane: SuiteTrait, TestTrait, TestScoping {
  let lane: ThreadLane

  var isRecursive: Bool { true }

  func provideScope(
    for test: Test, testCase: Test.Case?,
    performing function: @Sendable () async throws -> Void
  ) async throws {
    try await withTaskExecutorPreference(lane) { try await function() }
  }
}

extension Trait where Self == OnLane {
  /// The test body, and every child task it makes, run on `lane`'s threads.
  static func onLane(_ lane: ThreadLane) -> Self { OnLane(lane: lane) }
}
