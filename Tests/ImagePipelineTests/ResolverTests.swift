import Foundation
import Synchronization
import Testing

@testable import ImagePipeline

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

/// The resolver's waiters against deadlines and cancellations that come before they are
/// queued, with lookups held at a gate: a caller must be answered at once, never left waiting
/// for a lookup it has already given up (while it holds a fetch slot).
@Suite("Name resolver")
struct ResolverTests {
  /// Runs `operation` unstructured; its result, or nil when it has not finished in `seconds`
  /// (it goes on: the test's gate lets it end later).
  static func within<T: Sendable>(
    _ seconds: Double, _ operation: @escaping @Sendable () async throws -> T
  ) async -> Result<T, any Error>? {
    let once = Once()
    return await withCheckedContinuation { continuation in
      Task {
        let result: Result<T, any Error>
        do { result = .success(try await operation()) } catch { result = .failure(error) }
        if once.claim() { continuation.resume(returning: result) }
      }
      Task {
        try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        if once.claim() { continuation.resume(returning: nil) }
      }
    }
  }

  /// A resolver whose every lookup waits for `gate`.
  static func heldResolver(_ gate: DispatchSemaphore) -> SystemResolver {
    SystemResolver(maxThreads: 2, maxQueued: 64, cacheSeconds: 0) { _ in
      gate.wait()
      return .success([IPAddress("127.0.0.1")!])
    }
  }

  @Test("a task cancelled before it asks is answered at once, while the lookup is held")
  func cancelledBeforeQueued() async throws {
    let gate = DispatchSemaphore(value: 0)
    let resolver = Self.heldResolver(gate)
    defer { for _ in 0..<64 { gate.signal() } }
    for round in 0..<20 {
      let outcome = await Self.within(30) {
        try await withThrowingTaskGroup(of: [IPAddress].self) { group in
          // A child of a cancelled group starts cancelled: its cancellation handler runs
          // before the resolver has queued its waiter.
          group.cancelAll()
          group.addTask { try await resolver.addresses(of: "held-\(round).test", timeout: 600) }
          return try await group.next() ?? []
        }
      }
      guard let outcome else {
        Issue.record("round \(round): still waiting for the held lookup after 30 s")
        return
      }
      #expect(throws: CancellationError.self) { try outcome.get() }
    }
  }

  @Test("a deadline that passes before the waiter is queued answers it at once")
  func deadlineBeforeQueued() async throws {
    let gate = DispatchSemaphore(value: 0)
    let resolver = Self.heldResolver(gate)
    defer { for _ in 0..<400 { gate.signal() } }
    for round in 0..<100 {
      let outcome = await Self.within(30) {
        try await resolver.addresses(of: "slow-\(round % 4).test", timeout: 0)
      }
      guard let outcome else {
        Issue.record("round \(round): still waiting 30 s after its 0 s deadline")
        return
      }
      #expect(throws: FetchError.self) { try outcome.get() }
    }
  }
}
