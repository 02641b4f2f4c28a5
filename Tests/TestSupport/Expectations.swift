import Foundation
import Synchronization
import Testing

/// True for the first caller only.
final class Once: Sendable {
  private let done = Mutex(false)

  func claim() -> Bool {
    done.withLock { was in
      defer { was = true }
      return !was
    }
  }
}

/// Runs `operation` unstructured and waits for it on a continuation, at most `seconds` from
/// when it starts: its result, or nil when it has not finished by then (it goes on; the
/// test's gate lets it end later). For expectations that something is answered "at once"
/// without a test hanging when it is not. The clock starts with the operation, not before:
/// a task that waited for a thread of a busy pool has not yet been slow.
func within<T: Sendable>(
  _ seconds: Double, _ operation: @escaping @Sendable () async throws -> T
) async -> Result<T, any Error>? {
  let once = Once()
  return await withCheckedContinuation { continuation in
    Task {
      Task {
        try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        if once.claim() { continuation.resume(returning: nil) }
      }
      let result: Result<T, any Error>
      do { result = .success(try await operation()) } catch { result = .failure(error) }
      if once.claim() { continuation.resume(returning: result) }
    }
  }
}

/// Waits until `condition` holds: for conditions that other tasks or processes make true
/// without any timing assumption. It yields at first, then backs off (up to 20 ms between
/// looks), so a condition that takes a while does not spin on the few cooperative threads the
/// code under test needs. Fails the test instead of hanging when it does not hold within two
/// minutes (a generous bound: these conditions take milliseconds when the code works, but the
/// whole suite on two cores has held the cooperative threads for over a minute). The condition
/// is looked at once more after the deadline: a task that waited past it for a thread has not
/// seen the condition fail, only the clock move.
func eventually(
  _ description: String, _ condition: () async -> Bool,
  sourceLocation: SourceLocation = #_sourceLocation
) async {
  PoolGuard.installed
  let deadline = ContinuousClock.now.advanced(by: .seconds(120))
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
  if await condition() { return }
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

/// Answers that must come at once beside load the test itself makes (hostile origins, a flood
/// of loads, attacking clients): their median within `typical` seconds, none past `worst`. On
/// the shared 2-core CI machine one answer may wait a moment for a core; starvation, what
/// these tests look for, shows in every answer, and far past `worst`.
func expectPrompt(
  _ seconds: [Double], typical: Double = 1, worst: Double = 5, _ what: String,
  sourceLocation: SourceLocation = #_sourceLocation
) {
  let sorted = seconds.sorted()
  let median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
  #expect(
    median < typical, "\(what): median \(median) s of \(sorted)", sourceLocation: sourceLocation)
  #expect((sorted.last ?? 0) < worst, "\(what): \(sorted)", sourceLocation: sourceLocation)
}
