import Testing

@testable import ImagePipeline
@testable import TestSupport

/// Download slots shared between clients and origins, without sockets: the limiter alone.
@Suite("Fetch slots")
struct FetchSlotTests {
  @Test("one client holds at most three quarters of the slots; another still gets one at once")
  func clientCap() async throws {
    let limiter = PriorityLimiter(limit: 16)
    let flood = ClientID(1)
    var grants: [PriorityLimiter.Grant] = []
    for _ in 0..<12 {
      grants.append(
        try await limiter.acquire(priority: PriorityBox(.visible), client: flood))
    }
    // The flood's next load waits although four slots are free...
    let waiting = Task {
      try await limiter.acquire(priority: PriorityBox(.visible), client: flood)
    }
    await eventually("flood's thirteenth load waits") { limiter.queued == 1 }
    #expect(limiter.active == 12)
    // ...and another client's visible request takes one without waiting.
    let other = try await limiter.acquire(priority: PriorityBox(.visible), client: ClientID(2))
    #expect(limiter.active == 13)
    limiter.release(other)
    limiter.release(grants.removeLast())
    _ = try await waiting.value
    #expect(limiter.queued == 0)
  }

  @Test("a free slot goes to the client holding the fewest, not to the oldest request")
  func maxMinFairness() async throws {
    let limiter = PriorityLimiter(limit: 4)
    let big = ClientID(1)
    let small = ClientID(2)
    var held: [PriorityLimiter.Grant] = []
    for _ in 0..<3 {
      held.append(
        try await limiter.acquire(priority: PriorityBox(.visible), client: big))
    }
    held.append(try await limiter.acquire(priority: PriorityBox(.visible), client: small))
    // All four busy. The big client asks first, the small one after.
    let bigWaiter = Task {
      try await limiter.acquire(priority: PriorityBox(.visible), client: big)
    }
    await eventually("big waits") { limiter.queued == 1 }
    let smallWaiter = Task {
      try await limiter.acquire(priority: PriorityBox(.visible), client: small)
    }
    await eventually("small waits") { limiter.queued == 2 }
    // One of the big client's slots frees: it holds 2, the small one 1; the small one's
    // request is served although it came later.
    limiter.release(held.removeFirst())
    let granted = try await smallWaiter.value
    #expect(granted.client == small)
    #expect(limiter.queued == 1)
    limiter.release(granted)
    #expect(try await bigWaiter.value.client == big)
  }

  @Test("an origin that never answers holds at most its own share of the slots")
  func originCap() async throws {
    let limiter = PriorityLimiter(limit: 16, originLimit: 4)
    var dead: [PriorityLimiter.Grant] = []
    for id in 0..<4 {
      dead.append(
        try await limiter.acquire(
          priority: PriorityBox(.visible), client: ClientID(UInt64(id)),
          origin: "dead.example:80"))
    }
    let fifth = Task {
      try await limiter.acquire(
        priority: PriorityBox(.visible), client: ClientID(50), origin: "dead.example:80")
    }
    await eventually("fifth download from the dead origin waits") { limiter.queued == 1 }
    // Another origin is not held up by the waiting one.
    let healthy = try await limiter.acquire(
      priority: PriorityBox(.visible), client: ClientID(50), origin: "ok.example:80")
    #expect(healthy.origin == "ok.example:80")
    limiter.release(dead.removeFirst())
    #expect(try await fifth.value.origin == "dead.example:80")
  }

  @Test("a waiter that is cancelled never takes a slot")
  func cancelledWaiter() async throws {
    let limiter = PriorityLimiter(limit: 1)
    let first = try await limiter.acquire(priority: PriorityBox(.visible))
    let waiting = Task { try await limiter.acquire(priority: PriorityBox(.visible)) }
    await eventually("waiting") { limiter.queued == 1 }
    waiting.cancel()
    await #expect(throws: CancellationError.self) { try await waiting.value }
    limiter.release(first)
    #expect(limiter.active == 0)
  }
}
