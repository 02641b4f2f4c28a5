import Foundation
import Synchronization
import Testing

@testable import ImagePipeline
@testable import TestSupport

/// Prefetch work is capped and shared fairly between clients; visible work never waits for it.
@Suite("Prefetch admission")
struct PrefetchAdmissionTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  @Test("places are capped, and a freed place goes to the waiting client holding the fewest")
  func fairShare() async throws {
    let admission = PrefetchAdmission(limit: 2)
    let flood = ClientID(1)
    let list = ClientID(2)
    let order = Recorder<String>()
    for id in 1...2 {
      #expect(
        try await admission.enter(id: UInt64(id), client: flood, priority: PriorityBox(.prefetch)))
    }
    var waiting: [Task<Bool, any Error>] = []
    for id in 3...5 {
      waiting.append(
        Task {
          let placed = try await admission.enter(
            id: UInt64(id), client: flood, priority: PriorityBox(.prefetch))
          order.append("flood-\(id)")
          return placed
        })
      await eventually("flood \(id) waiting") { admission.queued == id - 2 }
    }
    let listWaiter = Task {
      let placed = try await admission.enter(
        id: 10, client: list, priority: PriorityBox(.prefetch))
      order.append("list")
      return placed
    }
    await eventually("list waiting") { admission.queued == 4 }
    // The list arrived last, but holds no place: it gets the first one freed.
    admission.leave(client: flood)
    #expect(try await listWaiter.value)
    #expect(order.values == ["list"])
    // Now both hold one: the flood's oldest waiter is next.
    admission.leave(client: flood)
    #expect(try await waiting[0].value)
    #expect(order.values == ["list", "flood-3"])
    #expect(admission.inProgress == 2)
    #expect(admission.queued == 2)
    admission.leave(client: list)
    admission.leave(client: flood)
    for task in waiting.dropFirst() { #expect(try await task.value) }
    #expect(order.values == ["list", "flood-3", "flood-4", "flood-5"])
  }

  @Test(
    "a client held back only by visible activity gets its place when the activity stops, with nobody leaving"
  )
  func heldBackWaiterLooksAgain() async throws {
    // Busy for half a second from now; nothing else will free a place.
    let activity = VisibleActivity(window: 0.5)
    let admission = PrefetchAdmission(limit: 3, busyLimit: 1, visibleActivity: activity)
    activity.note(ClientID(2))
    #expect(try await admission.enter(id: 1, client: ClientID(1), priority: PriorityBox(.prefetch)))
    let waiter = Task {
      try await admission.enter(id: 2, client: ClientID(1), priority: PriorityBox(.prefetch))
    }
    // No leave comes: only the queue looking again once the window has passed lets it in.
    let outcome = await within(30) { try await waiter.value }
    #expect(outcome != nil, "the held-back waiter was never looked at again")
    #expect(try outcome?.get() == true)
    #expect(admission.inProgress == 2)
  }

  @Test("while visible requests arrive, clients showing nothing share only the busy places")
  func backgroundPrefetchYields() async throws {
    // A window far longer than the test: "recent" holds throughout, no timing involved.
    let activity = VisibleActivity(window: 3600)
    let admission = PrefetchAdmission(limit: 3, busyLimit: 1, visibleActivity: activity)
    let (flood, list) = (ClientID(1), ClientID(2))
    activity.note(list)
    #expect(activity.isBusy && activity.isInteractive(list) && !activity.isInteractive(flood))
    // The flood gets the one busy place, and then waits although places are free...
    #expect(try await admission.enter(id: 1, client: flood, priority: PriorityBox(.prefetch)))
    let floodWaiter = Task {
      try await admission.enter(id: 2, client: flood, priority: PriorityBox(.prefetch))
    }
    await eventually("flood held back") { admission.queued == 1 }
    // ...while the list, which is showing things, takes the rest at once.
    for id in 3...4 {
      #expect(
        try await admission.enter(id: UInt64(id), client: list, priority: PriorityBox(.prefetch)))
    }
    #expect(admission.inProgress == 3)
    admission.leave(client: flood)
    admission.leave(client: list)
    // One list place still in use: the flood stays held back.
    #expect(admission.queued == 1)
    admission.leave(client: list)
    #expect(try await floodWaiter.value)
    #expect(admission.inProgress == 1)
  }

  @Test("a waiter raised above prefetch goes on without a place; a cancelled one takes none")
  func raisedAndCancelledWaiters() async throws {
    let admission = PrefetchAdmission(limit: 1)
    #expect(try await admission.enter(id: 1, client: .shared, priority: PriorityBox(.prefetch)))
    let raised = PriorityBox(.prefetch)
    let raisedWaiter = Task { try await admission.enter(id: 2, client: .shared, priority: raised) }
    let cancelledWaiter = Task {
      try await admission.enter(id: 3, client: .shared, priority: PriorityBox(.prefetch))
    }
    await eventually("two waiting") { admission.queued == 2 }
    raised.value = .visible
    admission.priorityChanged(id: 2)
    #expect(try await raisedWaiter.value == false)
    cancelledWaiter.cancel()
    await #expect(throws: CancellationError.self) { try await cancelledWaiter.value }
    #expect(admission.queued == 0)
    #expect(admission.inProgress == 1)
    // Visible work never waits here at all.
    #expect(
      try await admission.enter(id: 4, client: .shared, priority: PriorityBox(.visible)) == false)
  }

  @Test("one client's flood of prefetches cannot hold back another's, nor a visible load")
  func floodDoesNotStarveOthers() async throws {
    let loader = GatedLoader { _ in Self.photo }
    let pipeline = ThumbnailPipeline(
      configuration: .init(dataLoader: loader, decodeThreads: 1, maxPrefetchInProgress: 2))
    func request(_ name: String) -> ImageRequest {
      ImageRequest(url: "origin/\(name).jpg", spec: .known(ThumbnailSpec(width: 32, height: 32)))
    }
    let flood = (0..<10).map {
      pipeline.task(for: request("flood\($0)"), priority: .prefetch, client: ClientID(1))
    }
    await eventually("two flood downloads, eight waiting") {
      let queued = await pipeline.workload().queuedPrefetch
      return loader.starts.count == 2 && queued == 8
    }
    let look = pipeline.task(for: request("look"), priority: .prefetch, client: ClientID(2))
    await eventually("look-ahead waiting") { (await pipeline.workload()).queuedPrefetch == 9 }
    // A visible load of a waiting flood item does not wait for a place.
    let visible = pipeline.task(for: request("flood9"), priority: .visible, client: ClientID(3))
    await eventually("flood9 raised and downloading") {
      loader.starts.contains("origin/flood9.jpg")
    }
    // The first place freed goes to the other client, not to the flood's next item.
    loader.open(loader.starts[0])
    await eventually("look-ahead downloading") { loader.starts.count == 4 }
    #expect(loader.starts[3] == "origin/look.jpg")
    for name in ["look", "flood9"] { loader.open("origin/\(name).jpg") }
    #expect(try await look.response.source == .miss)
    #expect(try await visible.response.source == .coalesced)
    for task in flood { task.cancel() }
  }
}
