import Foundation
import Synchronization
import Testing

@testable import ImagePipeline
@testable import TestSupport

@Suite("Pipeline caches")
struct PipelineCachingTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  private func directory() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent(
      "thumbd-pipeline-\(UUID().uuidString)"
    ).path
  }

  private func request(_ size: Int) -> ImageRequest {
    ImageRequest(url: "origin/a.jpg", spec: .known(ThumbnailSpec(width: size, height: size)))
  }

  @Test("after a restart the disk cache answers, with identical bytes")
  func diskAfterRestart() async throws {
    let dir = directory()
    let loader = CountingLoader(["origin/a.jpg": Self.photo])
    let miss: ImageResponse
    do {
      let first = ThumbnailPipeline(
        configuration: .init(
          dataLoader: loader, diskCache: try DiskCache(directory: dir, sizeLimit: 1 << 24)))
      miss = try await first.response(for: request(64))
      #expect(miss.source == .miss)
      // Written after delivery: what a server does before it exits.
      await first.flushDiskWrites()
    }
    // The first pipeline is gone, and its cache's lock with it once the last of its tasks
    // has let go of it.
    guard let reopened = await reopenedCache(dir, sizeLimit: 1 << 24) else { return }
    let second = ThumbnailPipeline(
      configuration: .init(dataLoader: loader, diskCache: reopened))
    let hit = try await second.response(for: request(64))
    #expect(hit.source == .disk)
    #expect(hit.thumbnail == miss.thumbnail)
    #expect(try await second.response(for: request(64)).source == .memory)
    #expect(loader.urls.count == 1)
    #expect(second.metrics.snapshot().diskHits == 1)
  }

  @Test("a miss reads the memory cache twice: the server's lookup, and its job's own look")
  func memoryReadsPerMiss() async throws {
    let pipeline = ThumbnailPipeline(
      configuration: .init(dataLoader: CountingLoader(["origin/a.jpg": Self.photo])))
    let reads = { pipeline.memoryCache.statistics.lookups }
    guard case .miss(let miss) = pipeline.lookup(request(64)) else {
      Issue.record("an empty cache answered")
      return
    }
    #expect(reads() == 1)
    #expect(try await pipeline.response(after: miss).source == .miss)
    // The job looks once more (a job it joins may have ended meanwhile); the load before it
    // does not ask again what the lookup has just asked.
    #expect(reads() == 2)
    guard case .miss(let other) = pipeline.lookup(request(48)) else {
      Issue.record("a size never made answered")
      return
    }
    #expect(try await pipeline.task(after: other).response.source == .miss)
    #expect(reads() == 4)
    guard case .hit(let hit) = pipeline.lookup(request(64)) else {
      Issue.record("the thumbnail just made was not kept")
      return
    }
    #expect(hit.source == .memory)
    #expect(reads() == 5)
    // A caller that has not looked gets the look made for it, and the same one job look.
    _ = try await pipeline.response(for: request(32))
    #expect(reads() == 7)
  }

  @Test("a thumbnail made with another kernel is not served from the disk")
  func diskKeyHoldsTheKernel() async throws {
    let loader = CountingLoader(["origin/a.jpg": Self.photo])
    let disk = try DiskCache(directory: directory(), sizeLimit: 1 << 24)
    let first = ThumbnailPipeline(
      configuration: .init(
        dataLoader: loader, thumbnailer: Thumbnailer(filter: .catmullRom), diskCache: disk))
    #expect(try await first.response(for: request(64)).source == .miss)
    await first.flushDiskWrites()
    let again = ThumbnailPipeline(
      configuration: .init(
        dataLoader: loader, thumbnailer: Thumbnailer(filter: .catmullRom), diskCache: disk))
    // The same kernel is served from the disk, so the next miss is the kernel's doing.
    #expect(try await again.response(for: request(64)).source == .disk)
    let second = ThumbnailPipeline(configuration: .init(dataLoader: loader, diskCache: disk))
    let response = try await second.response(for: request(64))
    #expect(response.source == .miss)
    let fresh = try Thumbnailer().thumbnail(.bytes(Self.photo), spec: request(64).spec)
    #expect(response.thumbnail.data == fresh.data)
  }

  @Test("the source cache spares a second size its download")
  func sourceCache() async throws {
    let loader = CountingLoader(["origin/a.jpg": Self.photo])
    let sources = try DiskCache(directory: directory(), sizeLimit: 1 << 24)
    let first = ThumbnailPipeline(configuration: .init(dataLoader: loader, sourceCache: sources))
    _ = try await first.response(for: request(64))
    let second = ThumbnailPipeline(configuration: .init(dataLoader: loader, sourceCache: sources))
    _ = try await second.response(for: request(128))
    #expect(loader.urls.count == 1)
  }

  @Test("failures are not cached unless a negative cache is configured")
  func negativeCache() async throws {
    let loader = CountingLoader([:])
    let plain = ThumbnailPipeline(configuration: .init(dataLoader: loader))
    for _ in 0..<2 {
      await #expect(throws: PipelineError.fetch(.httpStatus(404))) {
        try await plain.response(for: request(64))
      }
    }
    #expect(loader.urls.count == 2)
    let remembering = ThumbnailPipeline(
      configuration: .init(dataLoader: loader, negativeCacheSeconds: 60))
    for _ in 0..<3 {
      await #expect(throws: PipelineError.fetch(.httpStatus(404))) {
        try await remembering.response(for: request(64))
      }
    }
    #expect(loader.urls.count == 3)
    #expect(remembering.metrics.snapshot().errors["http_status"] == 3)
  }

  @Test("a cancelled consumer gets CancellationError, which is not counted as an error")
  func cancellationIsNotAnError() async throws {
    let loader = GatedLoader { _ in Self.photo }
    let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: loader))
    let task = pipeline.task(for: request(64))
    await eventually("fetch waiting") { loader.waitingCount == 1 }
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.response }
    #expect(pipeline.metrics.snapshot().errors.isEmpty)
  }

  @Test("stage latencies are recorded")
  func latencies() async throws {
    let pipeline = ThumbnailPipeline(
      configuration: .init(dataLoader: CountingLoader(["origin/a.jpg": Self.photo])))
    _ = try await pipeline.response(for: request(64))
    let latencies = pipeline.metrics.snapshot().latencies
    for stage in PipelineMetrics.stages { #expect(latencies[stage]?.count == 1, "\(stage)") }
    #expect((latencies["decode"]?.sum ?? 0) > 0)
  }
}
