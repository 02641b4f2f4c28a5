import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Formats {
  /// JPEG XL through libjxl: the orientation applied on the small result, the DC image when it
  /// covers the output, and libjxl's memory counted against the decode's limit.
  @Suite("JPEG XL")
  struct JXLDecodeTests {
    let thumbnailer = Thumbnailer()

    @Test(
      "each orientation comes out upright, pixel for pixel as libjxl's own djxl shows it",
      arguments: [
        "orientation2_flip_horizontal", "orientation4_flip_vertical", "orientation6_rotate_90_cw",
        "orientation8_rotate_90_ccw",
      ])
    func orientation(name: String) async throws {
      let source = Corpus.path("jxl-valid/jxl-rs/\(name).jxl")
      let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-jxl-\(UUID().uuidString.prefix(8))").path
      try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(atPath: folder) }
      // djxl (libjxl-tools, installed by scripts/bootstrap) applies the orientation.
      let outcome = try await ChildProcess.runThumbd(
        [source, folder + "/djxl.png", "--quiet"], binary: "/usr/bin/djxl")
      #expect(outcome.status == 0)
      let reference = try thumbnailer.decodeFullResolution(.path(folder + "/djxl.png"))
      let shown = try thumbnailer.decodeFullResolution(
        .bytes(
          thumbnailer.thumbnail(
            .path(source), spec: ValidSpec(ThumbnailSpec(width: 1000, height: 1000, format: .png))
          ).data))
      #expect(shown == reference, "\(name) as djxl shows it")
    }

    @Test(
      "a small output stops at the DC image, as good against an exact area average as the full decode"
    )
    func dcImage() throws {
      let path = Corpus.path("jxl-valid/libjxl-conformance/progressive.jxl")  // 4064x2704
      let spec = ThumbnailSpec(width: 128, height: 128, format: .png)
      let fromDC = try thumbnailer.thumbnail(.path(path), spec: ValidSpec(spec))
      var full = thumbnailer
      full.shrinkOnLoad = false
      let fromFull = try full.thumbnail(.path(path), spec: ValidSpec(spec))
      #expect(fromDC.width == fromFull.width && fromDC.height == fromFull.height)
      let reference = ImageMetrics.areaAverage(
        try thumbnailer.decodeFullResolution(.path(path)), width: fromDC.width,
        height: fromDC.height)
      let dc = ImageMetrics.psnr(
        try thumbnailer.decodeFullResolution(.bytes(fromDC.data)), reference)
      let whole = ImageMetrics.psnr(
        try thumbnailer.decodeFullResolution(.bytes(fromFull.data)), reference)
      #expect(dc >= whole - 1, "DC \(dc) dB, full decode \(whole) dB")
      #expect(fromDC.decodedFromDCScans, "a 128 box stops at the DC image")
      // At 256 the DC image (508 wide) would cover the 448 pixels the output needs, but
      // without the room its approximation needs (it scored 0.1 dB under a full decode).
      let larger = try thumbnailer.thumbnail(
        .path(path), spec: ValidSpec(ThumbnailSpec(width: 256, height: 256)))
      #expect(!larger.decodedFromDCScans, "a 256 box decodes the whole image")
    }

    @Test("an animation of 3,000 frames: the first frame alone, in well under a second of CPU")
    func thousandsOfFrames() async throws {
      let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-jxl-\(UUID().uuidString.prefix(8))").path
      try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(atPath: folder) }
      // FFmpeg's test pattern as an APNG, then cjxl (libjxl-tools): both from scripts/bootstrap.
      let made = try await ChildProcess.runThumbd(
        [
          "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=100", "-frames:v", "3000",
          "-plays", "0", folder + "/anim.apng",
        ], binary: "/usr/bin/ffmpeg")
      #expect(made.status == 0)
      let encoded = try await ChildProcess.runThumbd(
        [folder + "/anim.apng", folder + "/anim.jxl", "-d", "0", "-e", "1", "--quiet"],
        binary: "/usr/bin/cjxl")
      #expect(encoded.status == 0)
      let outcome = try await ChildProcess.runThumbd(
        ["thumbnail", folder + "/anim.jxl", "--size", "32x32", "-o", folder + "/out.png"],
        measuringMemory: true)
      #expect(outcome.status == 0, "\(outcome.standardError)")
      #expect(outcome.cpuSeconds < 1, "\(outcome.cpuSeconds) s of CPU")
    }

    @Test("the frame buffer counts against the decode's memory limit: over it, a typed refusal")
    func memoryLimit() throws {
      // 3264x2448: an 8-bit frame of 24 MiB.
      var small = thumbnailer
      small.limits.maxDecoderMemory = 16 << 20
      small.shrinkOnLoad = false
      #expect {
        _ = try small.thumbnail(
          .path(Corpus.path("jxl-valid/jxlatte/ants.jxl")),
          spec: ValidSpec(ThumbnailSpec(width: 256, height: 256)))
      } throws: { error in
        guard let error = error as? ThumbnailError else { return false }
        return error.kind == "too_large"
      }
      // The same file within the default limit.
      #expect(
        try thumbnailer.thumbnail(
          .path(Corpus.path("jxl-valid/jxlatte/ants.jxl")),
          spec: ValidSpec(ThumbnailSpec(width: 256, height: 256))
        ).width == 256)
    }

    @Test(
      "the estimate follows the first frame's kind: a 12 MP VarDCT photo fits the default memory budget at every thumbnail size, lossy modular and an alpha channel count the worst case"
    )
    func estimateByFrame() throws {
      let photo = Corpus.path("photo/sdwebimage/TestJFIF.jpg")  // 4032x3024
      let vardct = try JXLEncoded.copy(of: photo, options: ["-d", "1", "-e", "3"])
      let modular = try JXLEncoded.copy(of: photo, options: ["-m", "1", "-d", "1", "-e", "3"])
      let alpha = try JXLEncoded.copy(of: photo, options: ["-d", "1", "-e", "3"], alpha: true)
      defer {
        for file in [vardct, modular, alpha] { try? FileManager.default.removeItem(atPath: file) }
      }
      // memory_budget's default (DaemonConfig, PipelineConfiguration): a decode estimated
      // above it gets 413 from the daemon.
      let budget = 256 << 20
      for box in [128, 256, 1024, 2048] {
        let estimate = try thumbnailer.estimate(
          .path(vardct), spec: ValidSpec(ThumbnailSpec(width: box, height: box)))
        #expect(estimate.bytes < budget, "VarDCT at \(box): \(estimate.bytes >> 20) MiB")
      }
      let pixels = 4032 * 3024
      for file in [modular, alpha] {
        let estimate = try thumbnailer.estimate(
          .path(file), spec: ValidSpec(ThumbnailSpec(width: 1024, height: 1024)))
        #expect(estimate.bytes >= 56 * pixels, "\(file): \(estimate.bytes >> 20) MiB")
      }
    }
  }
}
