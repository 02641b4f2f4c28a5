import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Formats {
  /// Camera RAW as its embedded preview: the right preview for the box, upright by the raw
  /// file's own orientation, and a typed refusal where there is none.
  @Suite("Camera RAW previews")
  struct RAWDecodeTests {
    let thumbnailer = Thumbnailer()

    /// The colour at the centre of a thumbnail.
    func centre(_ thumbnail: Thumbnail) throws -> [Int] {
      let shown = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
      let at = (shown.height / 2 * shown.width + shown.width / 2) * shown.channels
      return shown.pixels[at..<(at + 3)].map(Int.init)
    }

    func near(_ a: [Int], _ b: [UInt8]) -> Bool {
      zip(a, b).allSatisfy { abs($0 - Int($1)) <= 6 }
    }

    @Test(
      "a NEF's layout: the SubIFD preview, turned by IFD0's orientation; a TIFF header is not enough to be read as TIFF"
    )
    func nefPreview() throws {
      let bytes = RawFixtures.nefLike(preview: (640, 480), colour: [20, 180, 60], orientation: 6)
      #expect(SourceFormat.sniff(bytes) == .tiff)
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 256, height: 256)))
      #expect(
        thumbnail.width == 192 && thumbnail.height == 256, "orientation 6 turns 640x480 upright")
      #expect(thumbnail.sourceWidth == 640 && thumbnail.sourceHeight == 480)
      #expect(near(try centre(thumbnail), [20, 180, 60]))
    }

    @Test("a DNG's layout: its JPEG preview strip, never the sensor data")
    func dngPreview() throws {
      let bytes = RawFixtures.dngLike(preview: (1024, 683), colour: [30, 40, 200])
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 256, height: 256)))
      #expect(thumbnail.width == 256 && thumbnail.height == 171)
      #expect(near(try centre(thumbnail), [30, 40, 200]))
    }

    @Test(
      "a CR2's layout: the smallest preview that covers the box (with the JPEG headroom of 1.75), else the largest",
      arguments: [
        (60, [230, 220, 30]), (91, [230, 220, 30]), (100, [200, 30, 30]), (2000, [200, 30, 30]),
      ]
        as [(Int, [UInt8])])
    func cr2Choice(box: Int, colour: [UInt8]) throws {
      let bytes = RawFixtures.cr2Like(
        large: (800, 600), small: (160, 120), colours: ([200, 30, 30], [230, 220, 30]))
      #expect(SourceFormat.sniff(bytes) == .raw)
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: box, height: box)))
      #expect(thumbnail.width == min(box, 800))
      #expect(near(try centre(thumbnail), colour), "box \(box)")
    }

    @Test("a RAF: the JPEG its header points at")
    func rafPreview() throws {
      let bytes = RawFixtures.raf(preview: (600, 400), colour: [90, 90, 220])
      #expect(SourceFormat.sniff(bytes) == .raw)
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 150, height: 150)))
      #expect(thumbnail.width == 150 && thumbnail.height == 100)
      #expect(near(try centre(thumbnail), [90, 90, 220]))
    }

    @Test("a preview's own EXIF thumbnail is a candidate too: a RAF whose header JPEG is tiny")
    func exifThumbnailCandidate() throws {
      let bytes = RawFixtures.raf(
        preview: (0, 0), colour: [],
        jpeg: RawFixtures.jpegWithThumbnail(
          outer: (8, 8, [10, 10, 10]), inner: (160, 120, [200, 60, 60])))
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 160, height: 160)))
      #expect(thumbnail.width == 160 && thumbnail.height == 120)
      #expect(near(try centre(thumbnail), [200, 60, 60]))
    }

    @Test("no usable preview is a typed refusal: none there, an offset past the end, a loop")
    func refusals() throws {
      var b = RawFixtures.Builder()
      let make = b.blob(Array("NIKON\0".utf8))
      // A preview offset far past the end, a sensor directory, IFD0's next pointing at itself.
      let sensor = b.directory([(262, 3, [32803]), (259, 3, [1])])
      let ifd0Offset = b.bytes.count + (b.bytes.count % 2)
      let ifd0 = b.directory(
        [(271, 2, [6, make]), (330, 4, [sensor]), (513, 4, [0x7FFF_0000]), (514, 4, [4096])],
        next: ifd0Offset)
      #expect(ifd0 == ifd0Offset)
      let bytes = b.finish(ifd0: ifd0)
      #expect {
        _ = try thumbnailer.thumbnail(
          .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)))
      } throws: { ($0 as? ThumbnailError)?.kind == "unsupported_format" }
    }

    @Test("a plain TIFF with a Make tag (a scanner's) stays a TIFF")
    func scannerTIFF() throws {
      var b = RawFixtures.Builder()
      let make = b.blob(Array("EPSON\0".utf8))
      let strip = b.blob([UInt8](repeating: 77, count: 8 * 4 * 3))
      let ifd0 = b.directory([
        (256, 4, [8]), (257, 4, [4]), (258, 3, [8, 8, 8]), (259, 3, [1]), (262, 3, [2]),
        (271, 2, [6, make]), (273, 4, [strip]), (277, 3, [3]), (279, 4, [96]),
      ])
      let bytes = b.finish(ifd0: ifd0)
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 8, height: 8)))
      #expect(thumbnail.width == 8 && thumbnail.height == 4)
      #expect(near(try centre(thumbnail), [77, 77, 77]))
    }
  }
}
