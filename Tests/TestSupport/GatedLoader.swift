import Foundation
import ImagePipeline
import Synchronization
import Testing

/// A data loader whose fetches wait until the test opens their URL's gate. It records how often
/// each URL was fetched, in which order fetches started, and how many were cancelled.
final class GatedLoader: DataLoading {
  private struct Waiting {
    let url: String
    let continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var starts: [String] = []
    var open: Set<String> = []
    var waiting: [UInt64: Waiting] = [:]
    var cancelled = 0
    var nextID: UInt64 = 0
  }

  private let state = Mutex(State())
  private let bodies: @Sendable (String) -> [UInt8]

  init(bodies: @escaping @Sendable (String) -> [UInt8]) { self.bodies = bodies }

  func load(_ request: SourceRequest) async throws -> SourceResponse {
    let url = request.url
    let id = state.withLock { state -> UInt64 in
      state.starts.append(url)
      state.nextID += 1
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let openNow = state.withLock { state -> Bool in
          if state.open.contains(url) { return true }
          state.waiting[id] = Waiting(url: url, continuation: continuation)
          return false
        }
        if openNow { continuation.resume() }
      }
    } onCancel: {
      let waiter = state.withLock { state -> Waiting? in
        guard let waiter = state.waiting.removeValue(forKey: id) else { return nil }
        state.cancelled += 1
        return waiter
      }
      waiter?.continuation.resume(throwing: CancellationError())
    }
    return .modified(bodies(url), .unversioned())
  }

  /// Lets every present and future fetch of `url` complete.
  func open(_ url: String) {
    let released = state.withLock { state -> [Waiting] in
      state.open.insert(url)
      let matching = state.waiting.filter { $0.value.url == url }
      for key in matching.keys { state.waiting[key] = nil }
      return Array(matching.values)
    }
    for waiter in released { waiter.continuation.resume() }
  }

  /// Fetch starts, in order.
  var starts: [String] { state.withLock { $0.starts } }
  /// Fetches cancelled while waiting at their gate.
  var cancelled: Int { state.withLock { $0.cancelled } }
  /// Fetches currently waiting at a gate.
  var waitingCount: Int { state.withLock { $0.waiting.count } }
}

/// Waits until `condition` holds: for conditions that other tasks or processes make true
/// without any timing assumption. It yields at first, then backs off (up to 20 ms between
/// looks), so a condition that takes a while does not spin on the few cooperative threads the
/// code under test needs. Fails the test instead of hanging when it does not hold within a
/// minute (a generous bound: these conditions take milliseconds when the code works).
func eventually(
  _ description: String, _ condition: () async -> Bool,
  sourceLocation: SourceLocation = #_sourceLocation
) async {
  let deadline = ContinuousClock.now.advanced(by: .seconds(60))
  var pause = Duration.zero
  while ContinuousClock.now < deadline {
    if await condition() { return }
    if pause == .zero {
      await Task.yield()
    } else {
      try? await Task.sleep(for: pause)
    }
    pause = pause == .zero ? .microseconds(50) : min(pause * 2, .milliseconds(20))
  }
  Issue.record("never happened: \(description)", sourceLocation: sourceLocation)
}

/// Runs blocking work (a child process, a file tree) on a thread of its own, so the test's
/// task waits without holding one of the few cooperative threads.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { continuation in
    Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
  }
}

/// Blocking work started on a thread of its own at once, before the caller's next step.
/// `async let x = offPool { ... }` starts the thread only when the cooperative pool runs the
/// child task, which under load (a pool thread per core, all busy with other tests) can be
/// many seconds later.
final class StartedThread<T: Sendable>: Sendable {
  private let outcome = Mutex<Result<T, any Error>?>(nil)
  private let done = DispatchSemaphore(value: 0)

  init(_ work: @escaping @Sendable () throws -> T) {
    Thread.detachNewThread { [self] in
      let result = Result { try work() }
      outcome.withLock { $0 = result }
      done.signal()
    }
  }

  /// The work's result, waited for off the cooperative pool.
  var value: T {
    get async throws {
      try await offPool { [self] in
        done.wait()
        return try outcome.withLock { $0 }!.get()
      }
    }
  }

  /// The work's result, or nil when it has not finished within `limit` (the thread goes on).
  func value(within limit: Duration) async throws -> T? {
    let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
    let finished = try await offPool { [done] in done.wait(timeout: .now() + seconds) == .success }
    guard finished, let result = outcome.withLock({ $0 }) else { return nil }
    return try result.get()
  }
}
