import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Photos {
  /// The decoders against the outside robustness test's findings: each input gets its typed
  /// answer, and none costs more than 5 s of CPU or 64 MiB above the process baseline.
  @Suite("Hostile images", .serialized)
  struct HostileDecodeTests {
    @Test("each hostile input gets its typed answer", arguments: HostileInputs.all)
    func typedAnswer(input: HostileInputs.Input) throws {
      let spec = ThumbnailSpec(width: 256, height: 256)
      do {
        let thumbnail = try Thumbnailer().thumbnail(.bytes(input.bytes), spec: ValidSpec(spec))
        #expect(input.kind == nil, "\(input.name) gave a thumbnail, expected \(input.kind ?? "")")
        #expect(thumbnail.width >= 1)
      } catch {
        #expect(error.kind == input.kind, "\(input.name): \(error)")
      }
    }

    @Test(
      "each hostile input costs under 5 s of CPU (1 s for the second round's formats) and 64 MiB above the baseline, at default limits",
      arguments: HostileInputs.all)
    func boundedCost(input: HostileInputs.Input) async throws {
      let baseline = try await ChildProcess.runThumbd(["--help"], measuringMemory: true)
      let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-hostile-\(UUID().uuidString.prefix(8))").path
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(atPath: directory) }
      let file = directory + "/input"
      try Data(input.bytes).write(to: URL(fileURLWithPath: file))
      let outcome = try await ChildProcess.runThumbd(
        ["thumbnail", file, "--size", "256x256", "-o", directory + "/out/"], measuringMemory: true)
      #expect(outcome.status == (input.kind == nil ? 0 : 1), "\(outcome.standardError)")
      if let kind = input.kind { #expect(outcome.standardError.contains(": \(kind): ")) }
      // The second round's formats (issue 54) are held to 1 s.
      let seconds = HostileInputs.roundTwo.contains { $0.name == input.name } ? 1.0 : 5.0
      #expect(
        outcome.cpuSeconds < seconds, "\(input.name) took \(outcome.cpuSeconds) s of CPU")
      #expect(
        outcome.maxRSSKiB - baseline.maxRSSKiB < 64 * 1024,
        "\(input.name) peaked \(outcome.maxRSSKiB - baseline.maxRSSKiB) KiB above the baseline")
    }

    @Test("a decode past its deadline stops with decode_timeout")
    func deadline() throws {
      let large = try Corpus.bytes("png-valid/large/large.png")
      var thumbnailer = Thumbnailer()
      thumbnailer.limits.decodeTimeout = 0.001
      do throws(ThumbnailError) {
        _ = try thumbnailer.thumbnail(
          .bytes(large), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)))
        Issue.record("a 6000x3300 PNG decoded within 1 ms")
      } catch {
        #expect(error.kind == "decode_timeout")
      }
      thumbnailer.limits.decodeTimeout = 0
      #expect(
        try thumbnailer.thumbnail(
          .bytes(large), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64))
        ).width == 64
      )
    }

    @Test("real progressive files pass the scan limits; raising them lets a repeated scan through")
    func scanLimits() throws {
      let flat = try HostileInputs.fixture("flat_huff.jpg")
      let spec = ThumbnailSpec(width: 64, height: 64)
      #expect(try Thumbnailer().thumbnail(.bytes(flat), spec: ValidSpec(spec)).width == 64)
      let repeated = HostileInputs.repeatedScan(flat, times: 30)  // 34 scans, 21 passes
      #expect(throws: ThumbnailError.self) {
        try Thumbnailer().thumbnail(.bytes(repeated), spec: ValidSpec(spec))
      }
      var generous = Thumbnailer()
      generous.limits.maxScans = 100
      generous.limits.maxScanPasses = 100
      #expect(try generous.thumbnail(.bytes(repeated), spec: ValidSpec(spec)).width == 64)
      #expect(
        try Thumbnailer().thumbnail(
          .bytes(Corpus.bytes("photo/coil/normal.jpg")), spec: ValidSpec(spec)
        ).width > 0
      )
    }
  }
}
