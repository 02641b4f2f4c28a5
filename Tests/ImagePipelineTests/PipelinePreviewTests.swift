import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

/// `ThumbnailPipeline.task(onPreview:)`: a preview for the consumers that ask, once, before
/// their response; none for the others, none for hits.
@Suite("Pipeline previews")
struct PipelinePreviewTests {
  @Test(
    "a consumer that asks gets one preview before its response, one sharing the job without asking gets none, a memory hit none"
  )
  func onePreviewBeforeTheResponse() async throws {
    let copy = try Transcoded.copy(
      of: Corpus.path("photo/coil/normal.jpg"), as: .progressive, metadata: false)
    defer { try? FileManager.default.removeItem(atPath: copy) }
    let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: copy)))
    let pipeline = ThumbnailPipeline(
      configuration: .init(dataLoader: CountingLoader(["origin/p.jpg": bytes])))
    let request = ImageRequest(
      url: "origin/p.jpg", spec: .known(ThumbnailSpec(width: 64, height: 64)))
    let events = Recorder<String>()
    let asking = pipeline.task(for: request) { events.append("preview \($0.width)x\($0.height)") }
    let silent = pipeline.task(for: request)
    let response = try await asking.response
    events.append("response")
    _ = try await silent.response
    let seen = events.values
    #expect(seen.count == 2 && seen.first?.hasPrefix("preview") == true && seen.last == "response")
    #expect(response.thumbnail.width == 64 || response.thumbnail.height == 64)
    #expect(pipeline.metrics.snapshot().previews == 1)
    let hit = pipeline.task(for: request) { _ in events.append("late") }
    #expect(try await hit.response.source == .memory)
    #expect(!events.values.contains("late"))
  }

  @Test("a PNG carries no early picture: the consumer that asks gets its response alone")
  func noneForPNG() async throws {
    let png = Pictures.solid((10, 200, 30), size: 64)
    let pipeline = ThumbnailPipeline(
      configuration: .init(dataLoader: CountingLoader(["origin/s.png": png])))
    let request = ImageRequest(
      url: "origin/s.png", spec: .known(ThumbnailSpec(width: 16, height: 16)))
    let events = Recorder<String>()
    _ = try await pipeline.task(for: request) { _ in events.append("preview") }.response
    #expect(events.values.isEmpty)
    #expect(pipeline.metrics.snapshot().previews == 0)
  }
}
