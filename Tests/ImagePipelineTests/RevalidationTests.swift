import Foundation
import Synchronization
import Testing
import ThumbSystem

@testable import ImagePipeline
@testable import TestSupport

/// Revalidation inside the pipeline, with a loader that plays an origin with validators.
@Suite("Pipeline revalidation")
struct RevalidationTests {
  /// An origin whose one source has a revision; each answer carries its ETag and freshness.
  final class RevisedLoader: DataLoading {
    struct State {
      var revision = 1
      var freshFor = -1.0  // seconds; negative: stale at once
      var loads: [SourceValidator?] = []
    }
    let state = Mutex(State())
    let bodies: [[UInt8]]

    init(bodies: [[UInt8]]) { self.bodies = bodies }

    func load(_ request: SourceRequest) async throws -> SourceResponse {
      let (revision, freshFor) = state.withLock { state in
        state.loads.append(request.cached)
        return (state.revision, state.freshFor)
      }
      let version = SourceVersion(
        validator: .http(etag: "\"\(revision)\"", lastModified: nil),
        digest: UInt64(revision),
        freshness: Freshness(freshUntil: WallClock.now() + freshFor, lifetime: max(0, freshFor)))
      if request.cached == version.validator { return .notModified(version) }
      return .modified(bodies[(revision - 1) % bodies.count], version)
    }

    var loads: [SourceValidator?] { state.withLock { $0.loads } }
  }

  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")
  static let other = try! Corpus.bytes("photo/image-png/kodim02.png")

  @Test("a changed source's new bytes stay in the source cache: another size needs no download")
  func changeKeepsNewSourceBytes() async throws {
    let loader = RevisedLoader(bodies: [Self.photo, Self.other])
    let sources = try DiskCache(
      directory: FileManager.default.temporaryDirectory.appendingPathComponent(
        "thumbd-revalidation-\(UUID().uuidString)"
      ).path, sizeLimit: 1 << 26)
    let pipeline = ThumbnailPipeline(
      configuration: .init(dataLoader: loader, sourceCache: sources))
    func request(_ size: Int) -> ImageRequest {
      ImageRequest(url: "origin/a", spec: .known(ThumbnailSpec(width: size, height: size)))
    }
    let first = try await pipeline.response(for: request(64))
    #expect(first.source == .miss && loader.loads.count == 1)
    // Stale at once; the origin now has revision 2, fresh for an hour.
    loader.state.withLock {
      $0.revision = 2
      $0.freshFor = 3600
    }
    let second = try await pipeline.response(for: request(64))
    #expect(second.source == .miss && second.thumbnail.data != first.thumbnail.data)
    #expect(loader.loads.count == 2 && loader.loads[1] != nil, "one conditional request")
    #expect(pipeline.metrics.snapshot().revalidations["changed"] == 1)
    // Another size of the same source: its new bytes are cached, fresh, so no request.
    let third = try await pipeline.response(for: request(32))
    #expect(third.source == .miss)
    #expect(loader.loads.count == 2, "the new source bytes were dropped with the old thumbnails")
    // And the old size is answered from memory with the new picture.
    let again = try await pipeline.response(for: request(64))
    #expect(again.source == .memory && again.thumbnail.data == second.thumbnail.data)
  }
}
