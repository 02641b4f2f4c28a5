import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Formats {
  /// BMP and ICO/CUR through thumbd's own parser: every encoding gives back the picture it was
  /// written from, pixel for pixel, however its rows are stored; an icon shows the entry drawn
  /// for the size asked for.
  @Suite("BMP and ICO")
  struct BMPDecodeTests {
    let thumbnailer = Thumbnailer()

    static func picture(for encoding: BMPWriter.Encoding, width: Int = 37, height: Int = 23)
      -> Bitmap
    {
      let colours = encoding.indexBits.map { min(1 << $0, 12) } ?? 200
      return BMPWriter.picture(
        width: width, height: height, colours: colours, alpha: encoding == .argb32)
    }

    static func withoutAlpha(_ bitmap: Bitmap) -> Bitmap {
      Bitmap(
        pixels: stride(from: 0, to: bitmap.pixels.count, by: 4).flatMap {
          bitmap.pixels[$0..<($0 + 3)]
        }, width: bitmap.width, height: bitmap.height, channels: 3)
    }

    /// The largest difference of any sample between two bitmaps of the same size.
    static func largestDifference(_ a: Bitmap, _ b: Bitmap) -> Int {
      guard a.width == b.width, a.height == b.height, a.channels == b.channels else {
        return 255
      }
      return ImageMetrics.sampleDifference(a, b).worst
    }

    @Test(
      "every encoding decodes to the picture it was written from, bottom-up and top-down",
      arguments: BMPWriter.Encoding.allCases, [false, true])
    func decodesEachEncoding(encoding: BMPWriter.Encoding, topDown: Bool) throws {
      // OS/2 1.x sizes are unsigned: its rows are always bottom-up.
      guard !(topDown && encoding == .core8) else { return }
      let picture = Self.picture(for: encoding)
      let bytes = BMPWriter.bmp(picture, encoding, topDown: topDown)
      #expect(SourceFormat.sniff(bytes) == .bmp)
      var decoded = try thumbnailer.decodeFullResolution(.bytes(bytes))
      #expect(decoded.width == picture.width && decoded.height == picture.height)
      if encoding == .rle8 || encoding == .rle4 {
        // RLE decodes with alpha (a delta leaves pixels unpainted); these paint every one.
        #expect(decoded.channels == 4)
        #expect(
          stride(from: 3, to: decoded.pixels.count, by: 4).allSatisfy { decoded.pixels[$0] == 255 })
        decoded = Self.withoutAlpha(decoded)
      }
      #expect(decoded.channels == picture.channels, "\(encoding)")
      let expected = picture
      // Five or six bits a sample come back as the nearest 8-bit level.
      let tolerance = encoding.exact ? 0 : 8
      #expect(Self.largestDifference(decoded, expected) <= tolerance, "\(encoding)")
    }

    @Test("a thumbnail streamed from the file equals the one made from memory, upright")
    func streamedEqualsMemory() throws {
      let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-bmp-\(UUID().uuidString.prefix(8))").path
      try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(atPath: folder) }
      for encoding in [BMPWriter.Encoding.rgb24, .rle8, .palette4, .argb32] {
        let picture = Self.picture(for: encoding, width: 300, height: 180)
        let bytes = BMPWriter.bmp(picture, encoding)
        let path = folder + "/\(encoding).bmp"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let spec = ThumbnailSpec(width: 64, height: 64, format: .png)
        let fromMemory = try thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
        let fromFile = try thumbnailer.thumbnail(.path(path), spec: ValidSpec(spec))
        #expect(fromMemory == fromFile, "\(encoding)")
        #expect(fromMemory.width == 64 && fromMemory.height == 38)
        // Upright: the thumbnail's top-left matches the picture's top-left, not its bottom.
        let small = try thumbnailer.decodeFullResolution(.bytes(fromMemory.data))
        let top = Array(picture.pixels[0..<3])
        let bottom = Array(
          picture.pixels[((picture.height - 1) * picture.width * picture.channels)...].prefix(3))
        let shown = Array(small.pixels[0..<3])
        func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
          zip(a, b).map { abs(Int($0) - Int($1)) }.reduce(0, +)
        }
        #expect(distance(shown, top) < distance(shown, bottom), "\(encoding) is upside down")
      }
    }

    @Test("alpha: kept from an alpha mask, and an alpha of zero everywhere is no alpha")
    func alphaRules() throws {
      let picture = BMPWriter.picture(width: 20, height: 10, colours: 50, alpha: true)
      let withAlpha = try thumbnailer.decodeFullResolution(
        .bytes(BMPWriter.bmp(picture, .argb32)))
      #expect(withAlpha.channels == 4)
      #expect(withAlpha.pixels[3] == 0 && withAlpha.pixels[(19 * 4) + 3] == 255)
      // The same file with every alpha byte zeroed: opaque, colours intact.
      var cleared = picture
      for i in stride(from: 3, to: cleared.pixels.count, by: 4) { cleared.pixels[i] = 0 }
      let opaque = try thumbnailer.decodeFullResolution(.bytes(BMPWriter.bmp(cleared, .argb32)))
      #expect(opaque.channels == 3)
      #expect(Array(opaque.pixels[0..<3]) == Array(picture.pixels[0..<3]))
      // BI_RGB's fourth byte is padding, whatever it holds.
      var padded = BMPWriter.bmp(BMPWriter.picture(width: 8, height: 2, colours: 9), .rgb32)
      let pixelsAt = Int(padded[10])
      for i in stride(from: pixelsAt + 3, to: padded.count, by: 4) { padded[i] = 0x55 }
      #expect(try thumbnailer.decodeFullResolution(.bytes(padded)).channels == 3)
    }

    @Test("a bit field left out (a zero mask) reads as 0, the other channels as given")
    func emptyMask() throws {
      // A 2x1 16-bit bit-field file whose red mask is zero: green 0x07E0, blue 0x001F.
      let le = BMPWriter.le
      let header =
        le(40, 4) + le(2, 4) + le(1, 4) + le(1, 2) + le(16, 2) + le(3, 4) + le(0, 4)
        + le(2835, 4) + le(2835, 4) + le(0, 4) + le(0, 4)
      let masks = le(0, 4) + le(0x07E0, 4) + le(0x001F, 4)
      let rows = le(0xFFFF, 2) + le(0x001F, 2)
      let bytes =
        Array("BM".utf8) + le(14 + 52 + 4, 4) + le(0, 4) + le(14 + 52, 4) + header + masks + rows
      let decoded = try thumbnailer.decodeFullResolution(.bytes(bytes))
      #expect(Array(decoded.pixels[0..<6]) == [0, 255, 255, 0, 0, 255])
    }

    /// Solid pictures of one colour each, for telling icon entries apart.
    static func solid(_ side: Int, _ rgb: [UInt8]) -> Bitmap {
      Bitmap(
        pixels: Array([[UInt8]](repeating: rgb + [255], count: side * side).joined()),
        width: side, height: side, channels: 4)
    }

    @Test(
      "an icon shows the smallest entry that covers the box, else its largest",
      arguments: [
        (16, [255, 0, 0]), (24, [0, 255, 0]), (48, [0, 255, 0]), (64, [0, 255, 0]),
        (100, [0, 0, 255]), (512, [0, 0, 255]),
      ] as [(Int, [UInt8])])
    func nearestEntry(box: Int, colour: [UInt8]) throws {
      let icon = try BMPWriter.ico([
        (Self.solid(64, [0, 255, 0]), false), (Self.solid(16, [255, 0, 0]), false),
        (Self.solid(256, [0, 0, 255]), true),
      ])
      #expect(SourceFormat.sniff(icon) == .ico)
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(icon), spec: ValidSpec(ThumbnailSpec(width: box, height: box, format: .png)))
      #expect(thumbnail.width == min(box, 256) && thumbnail.height == min(box, 256))
      let shown = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
      let centre = (shown.height / 2 * shown.width + shown.width / 2) * shown.channels
      #expect(Array(shown.pixels[centre..<(centre + 3)]) == colour, "box \(box)")
    }

    @Test("an icon's AND mask is its alpha; a 32-bit entry's own alpha wins")
    func iconTransparency() throws {
      var picture = Self.solid(32, [10, 200, 30])
      for y in 0..<32 {
        for x in 0..<16 { picture.pixels[(y * 32 + x) * 4 + 3] = 0 }
      }
      for bgra in [false, true] {
        let decoded = try thumbnailer.decodeFullResolution(
          .bytes(try BMPWriter.ico([(picture, false)], bgra: bgra)))
        #expect(decoded.channels == 4)
        #expect(decoded.pixels[3] == 0, "left half transparent (bgra \(bgra))")
        #expect(decoded.pixels[(31 * 32 + 31) * 4 + 3] == 255, "right half opaque (bgra \(bgra))")
        #expect(
          Array(decoded.pixels[(31 * 32 + 31) * 4..<((31 * 32 + 31) * 4 + 3)]) == [10, 200, 30])
      }
    }

    @Test("an icon entry that lies is passed over when another can be read")
    func lyingEntryPassedOver() throws {
      var icon = try BMPWriter.ico([
        (Self.solid(48, [0, 0, 255]), false), (Self.solid(16, [255, 0, 0]), false),
      ])
      // The first entry's offset now points past the end.
      icon.replaceSubrange(18..<22, with: BMPWriter.le(1 << 30, 4))
      let decoded = try thumbnailer.decodeFullResolution(.bytes(icon))
      #expect(decoded.width == 16 && Array(decoded.pixels[0..<3]) == [255, 0, 0])
      // With no readable entry left, the answer is typed.
      icon.replaceSubrange(34..<38, with: BMPWriter.le(1 << 30, 4))
      #expect {
        _ = try thumbnailer.decodeFullResolution(.bytes(icon))
      } throws: { ($0 as? ThumbnailError)?.kind == "corrupt" }
    }
  }
}
