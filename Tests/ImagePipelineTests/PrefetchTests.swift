import Testing

@testable import ImagePipeline
@testable import TestSupport

/// Prefetch interest: counted per item, released by round token, shared with visible loads.
@Suite("Prefetching")
struct PrefetchTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")
  static let spec = ThumbnailSpec(width: 48, height: 48)

  private func setUp(fetches: Int = 16) -> (
    GatedLoader, ThumbnailPipeline, PrefetchCoordinator<String>
  ) {
    let loader = GatedLoader { _ in Self.photo }
    let pipeline = ThumbnailPipeline(
      configuration: .init(dataLoader: loader, maxConcurrentFetches: fetches))
    let coordinator = PrefetchCoordinator<String>(pipeline: pipeline) {
      ImageRequest(url: "origin/\($0).jpg", spec: .known(Self.spec))
    }
    return (loader, pipeline, coordinator)
  }

  @Test("interest is reference-counted across rounds and released by token")
  func referenceCounting() async throws {
    let (loader, _, coordinator) = setUp()
    let first = await coordinator.prefetch(["a", "b"])
    let second = await coordinator.prefetch(["b", "c"])
    await eventually("three fetches waiting") { loader.waitingCount == 3 }
    #expect(loader.starts.count == 3, "b is fetched once for both rounds")
    await coordinator.release(first)
    await eventually("a cancelled") { loader.cancelled == 1 }
    #expect(await coordinator.interestedItems == ["b", "c"])
    await coordinator.release(first)  // twice: ignored
    #expect(await coordinator.interestedItems == ["b", "c"])
    await coordinator.release(second)
    await eventually("b and c cancelled") { loader.cancelled == 3 }
    #expect(await coordinator.interestedItems.isEmpty)
  }

  @Test("a visible request joins the prefetch and raises its priority")
  func visibleJoinsPrefetch() async throws {
    let (loader, pipeline, coordinator) = setUp(fetches: 1)
    let blocker = pipeline.task(
      for: ImageRequest(url: "origin/blocker.jpg", spec: .known(Self.spec)))
    await eventually("blocker holds the slot") { loader.waitingCount == 1 }
    let round = await coordinator.prefetch(["p1", "p2"])
    await eventually("both queued") { pipeline.fetchLimiter.queued == 2 }
    let visible = pipeline.task(
      for: ImageRequest(url: "origin/p2.jpg", spec: .known(Self.spec)), priority: .visible)
    await eventually("joined") { pipeline.metrics.snapshot().coalescedJoins == 1 }
    for url in ["blocker", "p1", "p2"] { loader.open("origin/\(url).jpg") }
    _ = try await blocker.response
    #expect(try await visible.response.source == .coalesced)
    await eventually("p1 done") { loader.starts.count == 3 }
    #expect(loader.starts == ["origin/blocker.jpg", "origin/p2.jpg", "origin/p1.jpg"])
    // Releasing the round after a visible consumer joined never hurts the visible result, and
    // the prefetch warmed the cache.
    await coordinator.release(round)
    let again = try await pipeline.response(
      for: ImageRequest(url: "origin/p2.jpg", spec: .known(Self.spec)), priority: .visible)
    #expect(again.source == .memory)
  }

  @Test("finished prefetches are reported to the rounds that still want them")
  func observerReportsRounds() async throws {
    let loader = GatedLoader { _ in Self.photo }
    loader.open("origin/x.jpg")
    let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: loader))
    let events = Recorder<UInt64>()
    let coordinator = PrefetchCoordinator<String>(
      pipeline: pipeline,
      request: { ImageRequest(url: "origin/\($0).jpg", spec: .known(Self.spec)) },
      observer: { round, item, result in
        if case .success = result, item == "x" { events.append(round.id) }
      })
    let round = await coordinator.prefetch(["x"])
    await eventually("reported") { events.values == [round.id] }
  }
}
