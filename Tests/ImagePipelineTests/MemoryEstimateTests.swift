import Foundation
import Testing

@testable import ImagePipeline
@testable import TestSupport

extension DecodeSuites.Photos {
  /// `Thumbnailer.estimate` against what a decode really holds: the peak RSS of
  /// `thumbd thumbnail` on the file, above the same command on a tiny file of the same format.
  @Suite("Memory estimates", .serialized)
  struct MemoryEstimateTests {
    /// A corpus file or a generated one, and the box to thumbnail it into.
    struct Case: CustomTestStringConvertible, Sendable {
      let name: String
      let box: Int
      let make: @Sendable () throws -> String
      /// The output format (default: auto, PNG or JPEG).
      var format = OutputFormat.auto
      var testDescription: String { "\(name) at \(box) as \(format.rawValue)" }
    }

    static let corpusCases: [Case] = Corpus.entries.filter {
      $0.expected == "decode-ok" && ($0.note.contains("progressive,") || $0.note.contains("Adam7"))
    }.map { entry in Case(name: entry.path, box: 256, make: { Corpus.path(entry.path) }) }

    static func interlaced(_ photo: String) throws -> String {
      let bitmap = try Thumbnailer().decodeFullResolution(.path(Corpus.path(photo)))
      let file = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-adam7-\(UUID().uuidString.prefix(8)).png").path
      try Data(ImageEncoder.png(bitmap, level: 1, interlaced: true)).write(
        to: URL(fileURLWithPath: file))
      return file
    }

    /// The WebP, GIF and HEIF images of the corpus of 0.25 MP or more.
    static let formatCases: [Case] = Corpus.formatPhotos.map { entry in
      Case(name: entry.path, box: 256, make: { Corpus.path(entry.path) })
    }

    /// The smallest small corpus file of a format that decodes (decode-ok first; a format
    /// whose decode-ok files are all large, as camera RAW's, takes an `either` one that
    /// decodes): the baseline of its code paths.
    static func tinyFile(of format: SourceFormat) throws -> String {
      let all = Corpus.entries + Corpus.formatEntries + Corpus.formats2Entries
      func small(_ expected: String) -> [Corpus.Entry] {
        all.filter { entry in
          entry.expected == expected
            && (entry.storedSize.map { $0.width * $0.height <= 65536 } ?? false)
            && (try? SourceFormat.sniff(Corpus.bytes(entry.path))) == format
            && (try? Thumbnailer().thumbnail(
              .path(entry.url), spec: ValidSpec(ThumbnailSpec(width: 16, height: 16)))) != nil
        }
      }
      let candidates = small("decode-ok").isEmpty ? small("either") : small("decode-ok")
      let sized = try candidates.map { ($0, try Corpus.bytes($0.path).count) }
      return try #require(sized.min { $0.1 < $1.1 }, "no small \(format)").0.url
    }

    /// The encoders' own memory: AVIF's library holds several MiB (more at larger sizes).
    static let encoderCases: [Case] = [256, 1024].flatMap { box in
      [OutputFormat.webp, .avif].map { format in
        Case(
          name: "photo/coil/large.jpg", box: box, make: { Corpus.path("photo/coil/large.jpg") },
          format: format)
      }
    }

    /// The second round's formats (TIFF, BMP, ICO, camera RAW) in the corpus, of 0.25 MP or
    /// more.
    static let formats2Cases: [Case] = Corpus.nativeFormats2Entries(expected: "decode-ok").filter {
      ($0.storedSize.map { $0.width * $0.height >= 250_000 } ?? false)
        && DecodeSuites.Formats.Formats2CorpusTests.beyondDebianLibraries[$0.path] == nil
    }.map { entry in Case(name: entry.path, box: 256, make: { Corpus.path(entry.path) }) }

    /// The formats whose corpus files are all small, at 0.25 MP and more (GeneratedLarge).
    static let largeCases: [Case] = GeneratedLarge.files.map { file in
      Case(name: file.name, box: 256, make: { try file.write() })
    }

    static let generatedCases: [Case] = [
      // DC scans alone (1/8), and libjpeg's whole-image coefficients (a 1024 box needs 1/2).
      Case(
        name: "progressive 24 MP", box: 256,
        make: { try Transcoded.copy(of: Corpus.path("photo/coil/large.jpg"), as: .progressive) }),
      Case(
        name: "progressive 24 MP", box: 1024,
        make: { try Transcoded.copy(of: Corpus.path("photo/coil/large.jpg"), as: .progressive) }),
      Case(
        name: "progressive 4:4:4", box: 256,
        make: {
          try Transcoded.copy(
            of: Corpus.path("photo/squoosh/demo-large-photo.jpg"), as: .progressive)
        }),
      Case(
        name: "progressive 4:2:2", box: 512,
        make: {
          try Transcoded.copy(
            of: Corpus.path("photo/glide/issue387_rotated_jpeg.jpg"), as: .progressive)
        }),
      Case(
        name: "Adam7 6 MP", box: 256,
        make: { try interlaced("photo/sharp/2569067123_aca715a2ee_o.jpg") }),
      // JPEG XL by kind of frame: a VarDCT photo decoded whole (at 256 its DC image lacks the
      // room) and to its DC step, lossy modular, and VarDCT with an alpha channel.
      Case(name: "JPEG XL VarDCT 12 MP", box: 1024, make: { try jxl(["-d", "1", "-e", "3"]) }),
      Case(name: "JPEG XL VarDCT 12 MP", box: 256, make: { try jxl(["-d", "1", "-e", "3"]) }),
      Case(name: "JPEG XL VarDCT 12 MP", box: 128, make: { try jxl(["-d", "1", "-e", "3"]) }),
      Case(
        name: "JPEG XL lossy modular 12 MP", box: 1024,
        make: { try jxl(["-m", "1", "-d", "1", "-e", "3"]) }),
      Case(
        name: "JPEG XL VarDCT 12 MP with alpha", box: 1024,
        make: { try jxl(["-d", "1", "-e", "3"], alpha: true) }),
    ]

    static func jxl(_ options: [String], alpha: Bool = false) throws -> String {
      try JXLEncoded.copy(
        of: Corpus.path("photo/sdwebimage/TestJFIF.jpg"), options: options, alpha: alpha)
    }

    /// Peak RSS in bytes of `thumbd thumbnail` on a file, less the same on a 16x16 image of
    /// the same format (the process, its libraries, the code paths of that format).
    static func measuredPeak(
      _ file: String, box: Int, format: OutputFormat = .auto
    ) async throws -> Int {
      let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-estimate-\(UUID().uuidString.prefix(8))").path
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(atPath: directory) }
      let source = SourceFormat.sniff(try [UInt8](Data(contentsOf: URL(fileURLWithPath: file))))
      var small = directory + "/tiny"
      if source == .png || source == .jpeg {
        let tiny = Bitmap(
          pixels: [UInt8](repeating: 128, count: 16 * 16 * 3), width: 16, height: 16, channels: 3)
        try Data(source == .png ? ImageEncoder.png(tiny) : ImageEncoder.jpeg(tiny)).write(
          to: URL(fileURLWithPath: small))
      } else {
        small = try tinyFile(of: try #require(source))
      }
      var peaks: [Int] = []
      // The baseline writes PNG or JPEG: what an encoder's library holds is in the difference.
      for (input, output) in [(small, OutputFormat.auto), (file, format)] {
        let outcome = try await ChildProcess.runThumbd(
          [
            "thumbnail", input, "--size", "\(box)x\(box)", "--format", output.rawValue, "-o",
            directory + "/out/",
          ],
          measuringMemory: true)
        #expect(outcome.status == 0, "\(outcome.standardError)")
        peaks.append(outcome.maxRSSKiB * 1024)
      }
      return peaks[1] - peaks[0]
    }

    @Test(
      "the estimate is never below the measured peak",
      arguments: corpusCases + formatCases + encoderCases + generatedCases + largeCases
        + formats2Cases)
    func neverBelowPeak(item: Case) async throws {
      let file = try item.make()
      defer {
        if !file.hasPrefix(Corpus.root) { try? FileManager.default.removeItem(atPath: file) }
      }
      let estimate = try Thumbnailer().estimate(
        .path(file),
        spec: ValidSpec(ThumbnailSpec(width: item.box, height: item.box, format: item.format)))
      let peak = try await Self.measuredPeak(file, box: item.box, format: item.format)
      // Peak RSS of one process run against another spreads by about half a MiB here (the
      // 16x16 baseline alone peaked up to 496 KiB above some real files): allow 1 MiB.
      #expect(
        estimate.bytes + (1 << 20) >= peak,
        "\(item.name): estimate \(estimate.bytes >> 10) KiB, peak \(peak >> 10) KiB")
    }

    @Test(
      "a HEIF's alpha is one plane: a 3840x2160 AVIF with alpha fits the daemon's default memory_budget, and still counts four channels"
    )
    func alphaCountedOnce() throws {
      let spec = ThumbnailSpec(width: 256, height: 256)
      let avif = try Thumbnailer().estimate(
        .path(Corpus.path("heif-valid/av1-avif/bbb_alpha_inverted.avif")), spec: ValidSpec(spec))
      // Counted as a fourth channel on top of its own plane, it came to 259 MiB: refused
      // (413) by a daemon on its defaults. neverBelowPeak holds it above what it uses.
      #expect(avif.bytes < 256 << 20, "\(avif.bytes >> 20) MiB (the default is 256 MiB)")
      // Four channels a pixel, in each of AV1's four copies.
      let pixels = avif.sourceWidth * avif.sourceHeight
      #expect(avif.bytes >= pixels * 4 * 4)
    }

    @Test(
      "a HEIF grid counts its tiles in flight through the codec, not its whole frame: an 18 MP AV1 grid fits a 128 MiB budget"
    )
    func gridCountsTiles() throws {
      // 6400x2880 in 20 AV1 tiles. Counted as four whole-frame copies it came to 242 MiB, for
      // a measured peak of 77: refused (413) by a daemon with a 128 MiB memory_budget.
      // neverBelowPeak holds it above what it uses.
      let grid = try Thumbnailer().estimate(
        .path(Corpus.path("heif-valid/av1-avif/Summer_in_Tomsk_720p_5x4_grid.avif")),
        spec: ValidSpec(ThumbnailSpec(width: 256, height: 256)))
      #expect(grid.bytes < 128 << 20, "\(grid.bytes >> 20) MiB")
      // Still the frame libheif assembles, at 3 bytes a pixel, and more.
      #expect(grid.bytes >= grid.sourceWidth * grid.sourceHeight * 3)
    }

    @Test("the estimate counts what the source needs: progressive coefficients, Adam7 images")
    func countsTheBigBuffers() throws {
      let photo = Corpus.path("photo/coil/large.jpg")  // 4000x6000, 4:2:0
      let progressive = try Transcoded.copy(of: photo, as: .progressive)
      defer { try? FileManager.default.removeItem(atPath: progressive) }
      let thumbnailer = Thumbnailer()
      let spec = ThumbnailSpec(width: 1024, height: 1024)
      let baseline = try thumbnailer.estimate(.path(photo), spec: ValidSpec(spec))
      let coefficients = try thumbnailer.estimate(.path(progressive), spec: ValidSpec(spec))
      // 24 MP at 4:2:0: 1.5 x 375,000 blocks of 128 bytes.
      #expect(coefficients.bytes - baseline.bytes >= 70_000_000)
      let small = try thumbnailer.estimate(
        .path(progressive), spec: ValidSpec(ThumbnailSpec(width: 256, height: 256)))
      #expect(small.bytes < 16 << 20)
      #expect(small.decodeWidth == 500 && small.decodeHeight == 750)

      // The same pixels as a plain PNG and as Adam7: the whole image, 3 bytes a pixel, apart.
      let source = "photo/sharp/2569067123_aca715a2ee_o.jpg"  // 2725x2225
      let bitmap = try Thumbnailer().decodeFullResolution(.path(Corpus.path(source)))
      let plain = try Thumbnailer().estimate(
        .bytes(ImageEncoder.png(bitmap, level: 1)), spec: ValidSpec(spec))
      let adam7 = try Self.interlaced(source)
      defer { try? FileManager.default.removeItem(atPath: adam7) }
      let whole = try Thumbnailer().estimate(.path(adam7), spec: ValidSpec(spec))
      #expect(whole.bytes - plain.bytes >= 2725 * 2225 * 3)
    }
  }
}
