import Foundation
import Synchronization
import Testing

@testable import ImagePipeline
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Coalescing, reference-counted cancellation and priorities, with gates instead of sleeps.
@Suite("Pipeline")
struct PipelineTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")
  static let bigPNG = try! Corpus.bytes("png-valid/large/large.png")

  private func pipeline(
    _ loader: GatedLoader, fetches: Int = 16, decodeThreads: Int = 2
  ) -> ThumbnailPipeline {
    ThumbnailPipeline(
      configuration: .init(
        dataLoader: loader, maxConcurrentFetches: fetches, decodeThreads: decodeThreads))
  }

  private func request(_ url: String, _ size: Int = 64) -> ImageRequest {
    ImageRequest(url: url, spec: .known(ThumbnailSpec(width: size, height: size)))
  }

  @Test("1000 concurrent requests for one URL and size: one fetch, one decode, identical bytes")
  func thousandCoalesce() async throws {
    let loader = GatedLoader { _ in Self.photo }
    let pipeline = pipeline(loader)
    let tasks = (0..<1000).map { _ in pipeline.task(for: request("origin/a.jpg")) }
    await eventually("all subscribed") { pipeline.metrics.snapshot().coalescedJoins == 999 }
    #expect(loader.starts.count == 1)
    loader.open("origin/a.jpg")
    var responses: [ImageResponse] = []
    for task in tasks { responses.append(try await task.response) }
    #expect(loader.starts == ["origin/a.jpg"])
    #expect(pipeline.metrics.snapshot().decodes == 1)
    #expect(Set(responses.map(\.thumbnail.data)).count == 1)
    #expect(responses.filter { $0.source == .miss }.count == 1)
    #expect(responses.filter { $0.source == .coalesced }.count == 999)
    // Afterwards the memory cache answers.
    #expect(try await pipeline.response(for: request("origin/a.jpg")).source == .memory)
  }

  @Test("two sizes of one URL: one fetch, two decodes")
  func twoSizesShareTheDownload() async throws {
    let loader = GatedLoader { _ in Self.photo }
    let pipeline = pipeline(loader)
    let small = pipeline.task(for: request("origin/a.jpg", 32))
    let large = pipeline.task(for: request("origin/a.jpg", 96))
    await eventually("both waiting on one fetch") {
      pipeline.metrics.snapshot().coalescedJoins == 1
    }
    loader.open("origin/a.jpg")
    let a = try await small.response.thumbnail
    let b = try await large.response.thumbnail
    #expect(loader.starts.count == 1)
    #expect(pipeline.metrics.snapshot().decodes == 2)
    #expect(max(a.width, a.height) == 32 && max(b.width, b.height) == 96)
  }

  @Test("cancelling 999 of 1000 leaves the work running for the last")
  func cancelAllButOne() async throws {
    let loader = GatedLoader { _ in Self.photo }
    let pipeline = pipeline(loader)
    let tasks = (0..<1000).map { _ in pipeline.task(for: request("origin/a.jpg")) }
    await eventually("all subscribed") { pipeline.metrics.snapshot().coalescedJoins == 999 }
    for task in tasks.dropLast() { task.cancel() }
    for task in tasks.dropLast() {
      await #expect(throws: CancellationError.self) { try await task.response }
    }
    loader.open("origin/a.jpg")
    let last = try await tasks.last!.response
    #expect(last.thumbnail.width > 0)
    #expect(loader.cancelled == 0)
    #expect(pipeline.metrics.snapshot().cancelledWork == 0)
  }

  @Test("cancelling everyone cancels the download")
  func cancelAllStopsDownload() async throws {
    let loader = GatedLoader { _ in Self.photo }
    let pipeline = pipeline(loader)
    let tasks = (0..<10).map { _ in pipeline.task(for: request("origin/a.jpg")) }
    await eventually("download waiting") { loader.waitingCount == 1 }
    await eventually("all subscribed") { pipeline.metrics.snapshot().coalescedJoins == 9 }
    for task in tasks { task.cancel() }
    await eventually("download cancelled") { loader.cancelled == 1 }
    #expect(pipeline.metrics.snapshot().decodes == 0)
    #expect(pipeline.metrics.snapshot().cancelledWork >= 1)
  }

  @Test("a queued download whose consumers all leave never starts")
  func queuedJobNeverStarts() async throws {
    let loader = GatedLoader { _ in Self.photo }
    let pipeline = pipeline(loader, fetches: 1)
    let first = pipeline.task(for: request("origin/first.jpg"))
    await eventually("first holds the only slot") { loader.waitingCount == 1 }
    let queued = pipeline.task(for: request("origin/queued.jpg"))
    await eventually("second queued") { pipeline.fetchLimiter.queued == 1 }
    queued.cancel()
    await #expect(throws: CancellationError.self) { try await queued.response }
    await eventually("queue emptied") { await pipeline.workload().queuedFetches == 0 }
    #expect(await pipeline.workload().fetchesInFlight == 1)
    loader.open("origin/first.jpg")
    _ = try await first.response
    #expect(loader.starts == ["origin/first.jpg"])
  }

  /// The decode reads its source from a FIFO, so it cannot finish before the test has written
  /// every byte; the test writes the rest only after the worker raised the job's flag.
  @Test("a running decode stops part-way when its consumer leaves", .timeLimit(.minutes(1)))
  func decodeStopsPartWay() async throws {
    let fifo = FIFOFeeder.make()
    defer { unlink(fifo) }
    let workers = DecodeWorkers(threads: 1, maxQueued: 4)
    defer { workers.shutdown() }
    let context = JobContext(priority: .visible)
    let flag = Mutex<CancellationFlag?>(nil)
    let decode = Task {
      try await workers.run(context: context) { cancellation in
        flag.withLock { $0 = cancellation }
        return try Thumbnailer().thumbnail(
          .path(fifo), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)),
          cancellation: cancellation)
      }
    }
    // The rest is written only once the worker has raised the job's flag.
    FIFOFeeder.feed(Self.bigPNG, to: fifo, split: Self.bigPNG.count / 4) {
      while flag.withLock({ $0?.isCancelled }) != true { sched_yield() }
    }
    await eventually("decode running") { workers.load.running == 1 }
    decode.cancel()
    await #expect(throws: ThumbnailError.cancelled) { try await decode.value }
  }

  @Test("queued downloads run most urgent first, and a raised priority reorders the queue")
  func fetchPriorities() async throws {
    let loader = GatedLoader { _ in Self.photo }
    let pipeline = pipeline(loader, fetches: 1)
    let blocker = pipeline.task(for: request("origin/blocker.jpg"))
    await eventually("blocker running") { loader.waitingCount == 1 }
    var prefetches: [ImageTask] = []
    for i in 0..<5 {
      prefetches.append(pipeline.task(for: request("origin/p\(i).jpg"), priority: .prefetch))
      await eventually("p\(i) queued") { pipeline.fetchLimiter.queued == i + 1 }
    }
    let visible = pipeline.task(for: request("origin/visible.jpg"), priority: .visible)
    await eventually("visible queued") { pipeline.fetchLimiter.queued == 6 }
    prefetches[3].setPriority(.normal)
    await eventually("raise applied") { await pipeline.fetches.inFlight == 7 }
    for url in ["blocker", "visible", "p0", "p1", "p2", "p3", "p4"] {
      loader.open("origin/\(url).jpg")
    }
    _ = try await blocker.response
    _ = try await visible.response
    for task in prefetches { _ = try await task.response }
    #expect(
      loader.starts.map { $0.replacingOccurrences(of: "origin/", with: "") } == [
        "blocker.jpg", "visible.jpg", "p3.jpg", "p0.jpg", "p1.jpg", "p2.jpg", "p4.jpg",
      ])
  }
}
