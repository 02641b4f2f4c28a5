import Foundation
import Testing

@testable import ImagePipeline
@testable import Loopback
@testable import TestSupport

/// The pipeline under a budget that fits one big decode at a time: every job still
/// succeeds, work never holds more than the budget, and the jobs had to wait for memory.
@Suite("Pipeline under a memory budget", .serialized)
struct PipelineBudgetTests {
  /// The responses to `spec` of every URL, asked all at once.
  static func responses(
    _ urls: [String], _ spec: ThumbnailSpec, _ pipeline: ThumbnailPipeline
  ) async throws -> [ImageResponse] {
    try await withThrowingTaskGroup(of: ImageResponse.self) { group in
      for url in urls {
        group.addTask {
          try await pipeline.response(for: ImageRequest(url: url, spec: .known(spec)))
        }
      }
      var responses: [ImageResponse] = []
      for try await response in group { responses.append(response) }
      return responses
    }
  }

  @Test("big jobs under a small budget run within it, one decode at a time")
  func bigJobsWithinBudget() async throws {
    let copy = try Transcoded.copy(of: Corpus.path("photo/coil/large.jpg"), as: .progressive)
    defer { try? FileManager.default.removeItem(atPath: copy) }
    let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: copy)))
    let spec = ThumbnailSpec(width: 256, height: 256)
    let estimate = try Thumbnailer().estimate(.bytes(bytes), spec: ValidSpec(spec)).bytes
    let urls = (0..<4).map { "https://example.com/\($0).jpg" }
    let loader = CountingLoader(Dictionary(uniqueKeysWithValues: urls.map { ($0, bytes) }))
    // Room for one decode beside every source, but never for two decodes.
    let limit = estimate + 4 * bytes.count + (1 << 20)
    #expect(limit < 2 * estimate + 4 * bytes.count)
    let pipeline = ThumbnailPipeline(
      configuration: .init(
        dataLoader: loader, decodeThreads: 4, memoryBudget: limit,
        downloadReservation: bytes.count))
    for response in try await Self.responses(urls, spec, pipeline) {
      #expect(response.thumbnail.width == 171)
    }
    let figures = pipeline.memoryBudget
    #expect(figures.peakWork <= limit)
    #expect(figures.work == 0, "every source and decode gave its memory back")
    #expect(figures.refusals == 0)
  }

  /// Issue 52's soak of large photos: a download reserved a first share and counted the rest
  /// of its body as it came, without waiting, so a few large sources at once passed the
  /// budget. A body whose size is known first (a `Content-Length`, a file's size) now waits
  /// for room for all of it.
  @Test(
    "sources larger than their first share, by HTTP and from files, wait for room for the whole body: work never passes the budget",
    arguments: ["http", "file"])
  func largeBodiesWaitForRoom(scheme: String) async throws {
    let bytes = try Corpus.bytes("photo/coil/large.jpg")
    let spec = ThumbnailSpec(width: 64, height: 64)
    let estimate = try Thumbnailer().estimate(.bytes(bytes), spec: ValidSpec(spec)).bytes
    let count = 6
    // Room for two sources and a decode, never for all six sources at once.
    let limit = 2 * bytes.count + estimate + (256 << 10)
    #expect(limit < count * bytes.count)
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let origin = try LoopbackOrigin { _ in .init(body: bytes) }.start()
    defer { origin.stop() }
    var urls: [String] = []
    for index in 0..<count {
      if scheme == "http" {
        urls.append(origin.url("/\(index).jpg"))
      } else {
        try Data(bytes).write(to: URL(fileURLWithPath: directory + "/\(index).jpg"))
        urls.append("file://" + directory + "/\(index).jpg")
      }
    }
    let loader = SourceLoader(
      policy: SourcePolicy(
        allowedSchemes: ["http", "file"], allowedNetworks: IPNetwork.loopback,
        fileRoots: [directory]),
      // The last body waits for room while four decodes of a large photo end, which on a
      // loaded machine (the whole suite on two cores) has taken longer than the default 20 s
      // for the whole fetch. The test is about the budget, not the fetch's deadline.
      limits: FetchLimits(maxSourceBytes: 8 << 20, totalTimeout: 300))
    let pipeline = ThumbnailPipeline(
      configuration: .init(
        dataLoader: loader, decodeThreads: 2, memoryBudget: limit,
        downloadReservation: 256 << 10))
    for response in try await Self.responses(urls, spec, pipeline) {
      #expect(response.thumbnail.height == 64)
    }
    let figures = pipeline.memoryBudget
    #expect(figures.peakWork <= limit, "\(figures.peakWork) of \(limit)")
    #expect(figures.work == 0 && figures.refusals == 0)
    #expect(figures.waits > 0, "the sources had to wait for room")
  }

  @Test("a budget smaller than a download's first reservation still serves what fits")
  func reservationNeverOverBudget() async throws {
    let bytes = try Corpus.bytes("photo/thumbor/800px-Katherine_Maher.jpg")
    let url = "https://example.com/small.jpg"
    let pipeline = ThumbnailPipeline(
      configuration: .init(
        dataLoader: CountingLoader([url: bytes]), memoryBudget: 2 << 20,
        downloadReservation: 4 << 20))
    let response = try await pipeline.response(
      for: ImageRequest(url: url, spec: .known(ThumbnailSpec(width: 64, height: 64))))
    #expect(response.thumbnail.width == 64)
    #expect(pipeline.memoryBudget.refusals == 0)
  }
}
