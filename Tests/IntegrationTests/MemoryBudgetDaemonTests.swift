import Foundation
import ImagePipeline
import Testing

@testable import Loopback
@testable import TestSupport

/// `memory_budget` in the daemon: a job that alone needs more than the budget is refused with
/// 413 `too_large` before any pixel is decoded, and the budget's figures are in /metrics.
@Suite("Memory budget in the daemon", .serialized, .onLane(.clients))
struct MemoryBudgetDaemonTests {
  /// A daemon's directory, and the file root inside it the test's files go to.
  static func folders() throws -> (directory: String, root: String) {
    let directory = TestDaemon.makeDirectory()
    let root = directory + "/files"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    return (directory, root)
  }

  static func target(_ path: String, size: Int) -> String {
    let url = "file://" + path
    return "/v1/thumbnail?url=\(url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
      + "&w=\(size)&h=\(size)"
  }

  @Test("a job over the budget gets 413 too_large; the same source at 1/8 fits")
  func overBudget() async throws {
    let (directory, root) = try Self.folders()
    // 24 MP, progressive: at 1024 px libjpeg keeps every coefficient (about 70 MiB); at 256 px
    // the DC scans are enough (about 8 MiB).
    let copy = try Transcoded.copy(of: Corpus.path("photo/coil/large.jpg"), as: .progressive)
    let photo = root + "/large.jpg"
    try FileManager.default.moveItem(atPath: copy, toPath: photo)
    let daemon = try await TestDaemon.start(
      ["--file-root", root, "--memory-budget", "32MiB"], directory: directory)
    defer { daemon.stop() }

    let refused = SocketClient.get(daemon.socket, Self.target(photo, size: 1024)).response
    #expect(SocketClient.status(of: refused) == 413)
    let body = String(decoding: SocketClient.body(of: refused), as: UTF8.self)
    #expect(body.contains("\"too_large\""), "\(body)")
    #expect(daemon.metric("thumbd_decodes_total") == 0)
    #expect(daemon.metric("thumbd_memory_budget_refusals_total") == 1)

    let small = SocketClient.get(daemon.socket, Self.target(photo, size: 256))
    #expect(small.status == 200)
    #expect(daemon.metric("thumbd_memory_budget_bytes") == Double(32 << 20))
    let peak = try #require(daemon.metric("thumbd_memory_budget_peak_work_bytes"))
    #expect(peak > 0 && peak <= Double(32 << 20))
  }

  /// Issue 52's soak: the process's own memory (44 MiB once every decoder had run) was never
  /// counted, so RSS passed the budget by that much.
  @Test(
    "thumbd serve counts its own memory beyond memory_process_allowance in the budget; a job within the whole budget still runs"
  )
  func processMemory() async throws {
    let (directory, root) = try Self.folders()
    // A progressive JPEG keeps its coefficients while it decodes at 1/4 or more: the box
    // whose decode needs more than half the budget, and less than all of it.
    let copy = try Transcoded.copy(
      of: Corpus.path("photo/exif-samples/canon_hdr_NO.jpg"), as: .progressive)
    let picture = root + "/progressive.jpg"
    try FileManager.default.moveItem(atPath: copy, toPath: picture)
    let fitting = try [384, 512, 640, 768, 1024, 1536].map { box in
      (
        box,
        try Thumbnailer().estimate(
          .path(picture), spec: ValidSpec(ThumbnailSpec(width: box, height: box))
        ).bytes
      )
    }
    let (box, estimate) = try #require(
      fitting.first { $0.1 > 17 << 20 && $0.1 < 31 << 20 }, "\(fitting)")
    let daemon = try await TestDaemon.start(
      ["--file-root", root, "--memory-budget", "32MiB", "--memory-process-allowance", "0"],
      directory: directory)
    defer { daemon.stop() }
    let part = "thumbd_memory_budget_used_bytes{part=\"process\"}"
    // Nothing allowed: the whole process is counted, up to half the budget, which a daemon
    // that has started already holds (its RSS, read from outside, is more).
    let resident = try #require(daemon.residentKiB)
    #expect(resident * 1024 > 16 << 20)
    #expect(daemon.metric(part) == Double(16 << 20))
    // With work's room halved, a decode that needs most of the whole budget runs alone.
    let response = SocketClient.get(daemon.socket, Self.target(picture, size: box))
    #expect(response.status == 200)
    let peak = try #require(daemon.metric("thumbd_memory_budget_peak_work_bytes"))
    #expect(peak >= Double(estimate) && peak <= Double(32 << 20), "\(peak)")
    #expect(daemon.metric("thumbd_memory_budget_refusals_total") == 0)
  }

  /// The first HEIC a daemon decodes opens libavcodec and its hundred libraries, which stay
  /// resident (14-17 MiB): before any decode had ended, a first wave of them was counted as
  /// if the process would not grow.
  @Test(
    "a decoder's first run is counted with the process's growth it brings; once one has run, not again"
  )
  func firstUse() async throws {
    let root = try Self.folders().root
    let large = root + "/large.heic"
    let small = root + "/small.heic"
    try FileManager.default.copyItem(
      atPath: Corpus.path("heif-valid/metadata-extractor/IMG_1034.heic"), toPath: large)
    try FileManager.default.copyItem(
      atPath: Corpus.path("heif-valid/kimageformats/rgba.heic"), toPath: small)
    /// The most work a fresh daemon held over `files`, asked one after another.
    func peakWork(_ files: [String]) async throws -> Double {
      let daemon = try await TestDaemon.start(
        ["--file-root", root], directory: TestDaemon.makeDirectory())
      defer { daemon.stop() }
      for file in files {
        #expect(SocketClient.get(daemon.socket, Self.target(file, size: 256)).status == 200)
      }
      return try #require(daemon.metric("thumbd_memory_budget_peak_work_bytes"))
    }
    // The large one first: its own work and the growth together. After the small one has run,
    // the large one's work alone (the small one's, growth and all, is less).
    let first = try await peakWork([large])
    let afterSmall = try await peakWork([small, large])
    #expect(first - afterSmall == Double(16 << 20), "\(first) \(afterSmall)")
  }
}
