import CSystem
import Foundation
import ImagePipeline
import Sandbox
import Testing

@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Drawings from thumbd's worker in the sandbox (issue 53): a PDF's first page (poppler) and
/// an SVG (librsvg), every corpus file, pictures whose layout is known, against the desktop's
/// own thumbnailer, and the hostile shapes.
@Suite("Drawings", .serialized, .onLane(.clients))
struct DrawingFramesTests {
  /// One worker for the suite (its servers serve every test), with a deadline short enough
  /// for the corpus's endless drawings.
  static let shared = Result {
    try VideoFramesTests.frames(
      limits: VideoFrames.limits(deadline: .seconds(10)), label: "thumbd-drawing-tests")
  }

  static func thumbnailer(limits: DecodingLimits = DecodingLimits()) throws -> Thumbnailer {
    var thumbnailer = Thumbnailer(limits: limits)
    thumbnailer.frames = try shared.get()
    return thumbnailer
  }

  static func entries(_ expected: String) -> [Corpus.Entry] {
    Corpus.formats2Entries.filter {
      ($0.kind.hasPrefix("pdf") || $0.kind.hasPrefix("svg")) && $0.expected == expected
    }
  }

  static func thumbnail(
    _ bytes: [UInt8], box: Int = 256, format: OutputFormat = .png,
    limits: DecodingLimits = DecodingLimits()
  ) throws -> Thumbnail {
    try thumbnailer(limits: limits).thumbnail(
      .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: box, height: box, format: format)))
  }

  /// The size a drawing of `size` gets in a `box`: fitted, and enlarged when smaller (vectors
  /// lose nothing), as the desktop's thumbnailers draw them.
  static func fitted(_ size: (width: Int, height: Int), box: Int) -> (Int, Int) {
    let scale = min(Double(box) / Double(size.width), Double(box) / Double(size.height))
    return (
      max(1, Int((Double(size.width) * scale).rounded())),
      max(1, Int((Double(size.height) * scale).rounded()))
    )
  }

  /// Thumbnails of `entry` at 256, from memory and from its file, off the cooperative pool.
  static func both(_ entry: Corpus.Entry) async throws -> [Result<Thumbnail, ThumbnailError>] {
    try await CorpusChecks.madeOffPool(entry, thumbnailer: Self.thumbnailer(), box: 256)
  }

  @Test(
    "a decode-ok PDF or SVG gives a thumbnail of its page's shape, the same from memory and file",
    arguments: entries("decode-ok"))
  func decodes(_ entry: Corpus.Entry) async throws {
    let made = try await Self.both(entry)
    let fromMemory = try made[0].get()
    let fromFile = try made[1].get()
    #expect(fromMemory == fromFile)
    let size = try #require(entry.displayedSize, "manifest has no dimensions")
    let (width, height) = Self.fitted(size, box: 256)
    // The manifest rounds a drawing's sides to whole pixels (47.14 to 48): scaled to the
    // box, that rounding is up to the scale's pixels.
    let slack = 1 + Int((256 / Double(min(size.width, size.height))).rounded(.up))
    #expect(
      abs(fromFile.width - width) <= slack && abs(fromFile.height - height) <= slack,
      "\(fromFile.width)x\(fromFile.height), not \(width)x\(height)")
    #expect(ImageFormat.sniff(fromFile.data) == fromFile.format)
  }

  @Test("a must-reject PDF or SVG gets a typed refusal", arguments: entries("must-reject"))
  func rejects(_ entry: Corpus.Entry) async throws {
    CorpusChecks.expectRejected(try await Self.both(entry), entry)
  }

  @Test("an either PDF or SVG draws inside the box or is refused", arguments: entries("either"))
  func handles(_ entry: Corpus.Entry) async throws {
    CorpusChecks.expectHandled(try await Self.both(entry), box: 256)
  }

  /// The colour class at (x, y) of an encoded picture: "red", "green", "blue", "white",
  /// "clear" (transparent) or "other".
  static func colour(_ data: [UInt8], _ x: Int, _ y: Int) throws -> String {
    let bitmap = try Thumbnailer().decodeFullResolution(.bytes(data))
    let at = (y * bitmap.width + x) * bitmap.channels
    let (r, g, b) = (bitmap.pixels[at], bitmap.pixels[at + 1], bitmap.pixels[at + 2])
    if bitmap.channels == 4 && bitmap.pixels[at + 3] < 16 { return "clear" }
    switch (r > 200, g > 200, b > 200, r < 50, g < 50, b < 50) {
    case (true, _, _, _, true, true): return "red"
    case (_, true, _, true, _, true): return "green"
    case (_, _, true, true, true, _): return "blue"
    case (true, true, true, _, _, _): return "white"
    default: return "other"
    }
  }

  @Test("a PDF's first page is drawn upright, its /Rotate applied, and its size reported")
  func pdfLayout() throws {
    let upright = try Self.thumbnail(DrawingFixtures.pdf(width: 600, height: 400, pages: 3))
    #expect(upright.width == 256 && upright.height == 171)
    #expect(upright.sourceWidth == 600 && upright.sourceHeight == 400)
    #expect(!upright.hasAlpha, "a page is paper")
    #expect(try Self.colour(upright.data, 10, 100) == "red")
    #expect(try Self.colour(upright.data, 245, 100) == "blue")
    #expect(try Self.colour(upright.data, 128, 10) == "green")
    // Turned a quarter clockwise: the top band is on the right, the left half on top.
    let turned = try Self.thumbnail(DrawingFixtures.pdf(width: 600, height: 400, rotate: 90))
    #expect(turned.width == 171 && turned.height == 256)
    #expect(try Self.colour(turned.data, 10, 30) == "red")
    #expect(try Self.colour(turned.data, 10, 225) == "blue")
    #expect(try Self.colour(turned.data, 165, 128) == "green")
  }

  @Test("an SVG keeps its transparency; one that draws nothing is a blank page, not black")
  func svgTransparency() throws {
    let drawn = try Self.thumbnail(DrawingFixtures.svg(width: 400, height: 200, margin: 20))
    #expect(drawn.width == 256 && drawn.height == 128 && drawn.hasAlpha)
    #expect(try Self.colour(drawn.data, 2, 2) == "clear")
    #expect(try Self.colour(drawn.data, 40, 80) == "red")
    #expect(try Self.colour(drawn.data, 215, 80) == "blue")
    #expect(try Self.colour(drawn.data, 128, 20) == "green")
    let empty = Array(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"40\" height=\"40\"></svg>".utf8)
    let blank = try Self.thumbnail(empty)
    #expect(try Self.colour(blank.data, 128, 128) == "white")
  }

  @Test("a small drawing is drawn at the box's size; a huge one within the pixel limit")
  func sizes() throws {
    let small = try Self.thumbnail(DrawingFixtures.svg(width: 16, height: 8))
    #expect(small.width == 256 && small.height == 128)
    #expect(small.sourceWidth == 256 && small.sourceHeight == 128)
    // A page of 500,000 x 250,000 points in a box free across, under a small pixel limit:
    // the worker draws it smaller, not refused, and never over the limit.
    let bytes = DrawingFixtures.pdf(width: 500_000, height: 250_000)
    let file = ts_memory_file()
    try #require(file >= 0)
    defer { close(file) }
    #expect(bytes.withUnsafeBytes { pwrite(file, $0.baseAddress, $0.count, 0) } == bytes.count)
    var limits = DecodingLimits()
    limits.maxPixels = 1 << 20
    let huge = try Self.shared.get().frame(
      ofFile: file, source: .drawing(.pdf), name: "huge.pdf", width: 0, height: 4096,
      limits: limits, cancellation: nil)
    let picture = try Thumbnailer().decodeFullResolution(.bytes(huge.image))
    #expect(picture.width * picture.height <= 1 << 20)
    #expect(abs(picture.width - 2 * picture.height) <= 2)
    #expect(huge.sourceSize.map { $0.0 == 500_000 && $0.1 == 250_000 } == true)
  }

  @Test("a compressed SVG is drawn, whatever its name; other gzip files are not drawings")
  func compressed() async throws {
    let folder = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    try Data(DrawingFixtures.svg(width: 100, height: 100)).write(
      to: URL(fileURLWithPath: folder + "/a.svg"))
    let zipped = try await ChildProcess.runThumbd(
      ["-9", "-c", folder + "/a.svg"], standardOutput: folder + "/a.svgz", binary: "/usr/bin/gzip")
    #expect(zipped.status == 0)
    try FileManager.default.copyItem(atPath: folder + "/a.svgz", toPath: folder + "/a.gz")
    try Data(repeating: 0x3C, count: 5000).write(to: URL(fileURLWithPath: folder + "/text"))
    let other = try await ChildProcess.runThumbd(
      ["-9", "-c", folder + "/text"], standardOutput: folder + "/text.svgz",
      binary: "/usr/bin/gzip")
    #expect(other.status == 0)
    let spec = try ValidSpec(ThumbnailSpec(width: 64, height: 64, format: .png))
    for name in ["a.svgz", "a.gz"] {
      let drawn = try Self.thumbnailer().thumbnail(.path(folder + "/" + name), spec: spec)
      #expect(try Self.colour(drawn.data, 5, 40) == "red")
      let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: folder + "/" + name)))
      #expect(DrawingFormat.sniff(bytes) == .svg)
    }
    #expect(throws: ThumbnailError.self) {
      _ = try Self.thumbnailer().thumbnail(.path(folder + "/text.svgz"), spec: spec)
    }
  }

  @Test("an SVG naming a planted picture outside it gets nothing of it; the same as data does")
  func plantedPicture() throws {
    let folder = TestDaemon.makeDirectory()
    chmod(folder, 0o755)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let planted = Pictures.solid((255, 0, 255), size: 16)
    try Data(planted).write(to: URL(fileURLWithPath: folder + "/planted.png"))
    chmod(folder + "/planted.png", 0o644)
    func image(_ reference: String) -> String {
      "<image x=\"0\" y=\"0\" width=\"100\" height=\"100\" xlink:href=\"\(reference)\"/>"
    }
    let references = [
      "file://" + folder + "/planted.png", folder + "/planted.png", "planted.png",
      "../planted.png",
    ]
    for reference in references {
      let svg = DrawingFixtures.svg(width: 100, height: 100, extra: image(reference))
      // Drawn from the file beside the planted picture, as the desktop would.
      try Data(svg).write(to: URL(fileURLWithPath: folder + "/drawing.svg"))
      let drawn = try Self.thumbnailer().thumbnail(
        .path(folder + "/drawing.svg"),
        spec: ValidSpec(ThumbnailSpec(width: 64, height: 64, format: .png)))
      #expect(try Self.colour(drawn.data, 5, 40) == "red", "\(reference)")
    }
    // The control: the same picture as a data URI is drawn, so the loader works.
    let inline = "data:image/png;base64," + Data(planted).base64EncodedString()
    let shown = try Self.thumbnail(
      DrawingFixtures.svg(width: 100, height: 100, extra: image(inline)), box: 64)
    #expect(try Self.colour(shown.data, 5, 40) == "other")
  }

  @Test("PDFs look as the desktop's own thumbnailer (evince) draws them")
  func againstEvince() async throws {
    let evince = "/usr/bin/evince-thumbnailer"
    try #require(
      access(evince, X_OK) == 0, "scripts/bootstrap's test packages install evince")
    let folder = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    var differences: [Double] = []
    let thumbnailer = try Self.thumbnailer()
    let spec = try ValidSpec(ThumbnailSpec(width: 256, height: 256, format: .png))
    for entry in Self.entries("decode-ok") where entry.kind.hasPrefix("pdf") {
      let ours = try await offPool { try thumbnailer.thumbnail(.path(entry.url), spec: spec) }
      let theirs = folder + "/evince.png"
      let run = try await ChildProcess.runThumbd(
        ["-s", "256", entry.url, theirs], binary: evince)
      try #require(run.status == 0, "\(entry.path): \(run.standardError)")
      let reference = try Thumbnailer().decodeFullResolution(.path(theirs))
      let picture = try Thumbnailer().decodeFullResolution(.bytes(ours.data))
      guard reference.width == picture.width, reference.height == picture.height else {
        Issue.record(
          "\(entry.path): \(picture.width)x\(picture.height) against evince's \(reference.width)x\(reference.height)"
        )
        continue
      }
      let difference = ImageMetrics.sampleDifference(
        ImageMetrics.flattened(picture, background: 255),
        ImageMetrics.flattened(reference, background: 255)
      ).mean
      #expect(difference < 8, "\(entry.path): \(difference) of 255")
      differences.append(difference)
    }
    #expect(differences.count >= 10)
    let mean = differences.reduce(0, +) / Double(max(1, differences.count))
    #expect(mean < 3, "mean difference \(mean) of 255")
  }
}
