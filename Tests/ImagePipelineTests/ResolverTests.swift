import Foundation
import Synchronization
import Testing

@testable import ImagePipeline
@testable import TestSupport

/// The resolver's waiters against deadlines and cancellations that come before they are
/// queued, with lookups held at a gate: a caller must be answered at once, never left waiting
/// for a lookup it has already given up (while it holds a fetch slot).
@Suite("Name resolver")
struct ResolverTests {
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
      let outcome = await within(30) {
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
      let outcome = await within(30) {
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
