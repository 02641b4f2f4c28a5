import Foundation
import ImagePipeline
import Testing
import ThumbSystem

@testable import TestSupport

extension DecodeSuites.Formats {
  /// TIFF through libtiff: every layout gives back the picture it was written from, the
  /// orientation tag is applied, and a pyramid is read at the smallest level that covers the
  /// output.
  @Suite("TIFF")
  struct TIFFDecodeTests {
    let thumbnailer = Thumbnailer()

    static let picture = BMPWriter.picture(width: 41, height: 27, colours: 200)
    static let withAlpha = BMPWriter.picture(width: 41, height: 27, colours: 200, alpha: true)

    static func grey(_ bitmap: Bitmap) -> Bitmap {
      Bitmap(
        pixels: stride(from: 0, to: bitmap.pixels.count, by: bitmap.channels).map {
          bitmap.pixels[$0]
        }, width: bitmap.width, height: bitmap.height, channels: 1)
    }

    static func rgb(ofGrey bitmap: Bitmap) -> Bitmap {
      Bitmap(
        pixels: bitmap.pixels.flatMap { [$0, $0, $0] }, width: bitmap.width,
        height: bitmap.height, channels: 3)
    }

    /// A layout, and the picture it must decode to.
    struct Layout: CustomTestStringConvertible, Sendable {
      let name: String
      let image: TIFFWriter.Image
      let expected: Bitmap
      var testDescription: String { name }
    }

    static let layouts: [Layout] = {
      typealias I = TIFFWriter.Image
      let grey = Self.grey(picture)
      var list = [
        Layout(name: "RGB, 8 bits, strips", image: I(picture: picture), expected: picture),
        Layout(name: "RGB, 16 bits", image: I(picture: picture, bits: 16), expected: picture),
        Layout(
          name: "RGB, tiles with edge tiles", image: I(picture: picture, tile: 16),
          expected: picture),
        Layout(
          name: "RGB, separate planes (libtiff's RGBA reader)",
          image: I(picture: picture, separatePlanes: true), expected: picture),
        Layout(
          name: "RGBA, unassociated", image: I(picture: withAlpha, alphaKind: 2),
          expected: withAlpha),
        Layout(
          name: "grey, 8 bits", image: I(picture: grey, photometric: 1),
          expected: rgb(ofGrey: grey)),
        Layout(
          name: "grey, 16 bits, one strip",
          image: I(picture: grey, bits: 16, photometric: 1, rowsPerStrip: 27),
          expected: rgb(ofGrey: grey)),
      ]
      // A palette of the picture's colours: indices in the first channel.
      var colours: [[UInt8]] = []
      var known: [[UInt8]: Int] = [:]
      var indices: [UInt8] = []
      for i in 0..<(picture.width * picture.height) {
        let rgb = Array(picture.pixels[(i * 3)..<(i * 3 + 3)])
        if known[rgb] == nil {
          known[rgb] = colours.count
          colours.append(rgb)
        }
        indices.append(UInt8(known[rgb]!))
      }
      list.append(
        Layout(
          name: "palette, 8 bits",
          image: I(
            picture: Bitmap(
              pixels: indices, width: picture.width, height: picture.height, channels: 1),
            photometric: 3, palette: colours), expected: picture))
      return list
    }()

    @Test("every layout decodes to the picture it was written from", arguments: layouts)
    func decodesLayout(layout: Layout) throws {
      let bytes = TIFFWriter.file([layout.image])
      #expect(SourceFormat.sniff(bytes) == .tiff)
      let decoded = try thumbnailer.decodeFullResolution(.bytes(bytes))
      #expect(decoded.width == layout.expected.width && decoded.height == layout.expected.height)
      #expect(decoded.channels == layout.expected.channels)
      #expect(
        BMPDecodeTests.largestDifference(decoded, layout.expected) <= 1,
        "\(layout.name): largest difference \(BMPDecodeTests.largestDifference(decoded, layout.expected))"
      )
    }

    @Test(
      "the orientation tag is applied, the same through libtiff's RGBA reader",
      arguments: [false, true])
    func orientation(separatePlanes: Bool) throws {
      for orientation in 1...8 {
        let upright = try thumbnailer.decodeFullResolution(
          .bytes(
            TIFFWriter.file([
              TIFFWriter.Image(picture: Self.picture, separatePlanes: separatePlanes)
            ])))
        var image = TIFFWriter.Image(picture: Self.picture, separatePlanes: separatePlanes)
        image.orientation = orientation
        let turned = try thumbnailer.decodeFullResolution(.bytes(TIFFWriter.file([image])))
        #expect(
          turned == Self.shown(upright, orientation: orientation), "orientation \(orientation)")
      }
    }

    /// Stored pixels as they must be shown under an orientation, from TIFF's (and EXIF's)
    /// definition: where the stored 0th row and 0th column appear (1 top and left, 2 top and
    /// right, 3 bottom and right, 4 bottom and left, 5 left and top, 6 right and top, 7 right
    /// and bottom, 8 left and bottom).
    static func shown(_ stored: Bitmap, orientation: Int) -> Bitmap {
      let (w, h, c) = (stored.width, stored.height, stored.channels)
      let swapped = orientation >= 5
      let (dw, dh) = swapped ? (h, w) : (w, h)
      var pixels = [UInt8](repeating: 0, count: dw * dh * c)
      for y in 0..<dh {
        for x in 0..<dw {
          // (column, row) of the stored pixel shown at (x, y).
          let (sx, sy): (Int, Int)
          switch orientation {
          case 2: (sx, sy) = (w - 1 - x, y)
          case 3: (sx, sy) = (w - 1 - x, h - 1 - y)
          case 4: (sx, sy) = (x, h - 1 - y)
          case 5: (sx, sy) = (y, x)
          case 6: (sx, sy) = (y, h - 1 - x)
          case 7: (sx, sy) = (w - 1 - y, h - 1 - x)
          case 8: (sx, sy) = (w - 1 - y, x)
          default: (sx, sy) = (x, y)
          }
          for k in 0..<c { pixels[(y * dw + x) * c + k] = stored.pixels[(sy * w + sx) * c + k] }
        }
      }
      return Bitmap(pixels: pixels, width: dw, height: dh, channels: c)
    }

    /// A solid picture.
    static func solid(_ width: Int, _ height: Int, _ rgb: [UInt8]) -> Bitmap {
      Bitmap(
        pixels: Array([[UInt8]](repeating: rgb, count: width * height).joined()), width: width,
        height: height, channels: 3)
    }

    @Test(
      "a pyramid is read at the smallest level that covers the box, in the main chain or as SubIFDs",
      arguments: [false, true])
    func pyramidLevel(asSubIFDs: Bool) throws {
      typealias I = TIFFWriter.Image
      let page = I(picture: Self.solid(800, 600, [200, 0, 0]), tile: 256)
      let levels = [
        I(picture: Self.solid(200, 150, [0, 200, 0]), tile: 128, reduced: true),
        I(picture: Self.solid(52, 39, [0, 0, 200]), tile: 64, reduced: true),
      ]
      var main = page
      if asSubIFDs { main.subImages = levels }
      let bytes = TIFFWriter.file(asSubIFDs ? [main] : [page] + levels)
      // A level is the picture made small by its writer: the one at least as large as the
      // box is taken, with no headroom.
      for (box, colour) in [
        (40, [0, 0, 200]), (52, [0, 0, 200]), (100, [0, 200, 0]), (300, [200, 0, 0]),
      ] {
        let thumbnail = try thumbnailer.thumbnail(
          .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: box, height: box, format: .png)))
        #expect(thumbnail.width == box && thumbnail.sourceWidth == 800)
        let shown = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
        let centre = (shown.height / 2 * shown.width + shown.width / 2) * 3
        #expect(Array(shown.pixels[centre..<(centre + 3)]) == colour.map(UInt8.init), "box \(box)")
      }
      // Pages after the first are not its levels: a second full-size page is never read.
      let twoPages = TIFFWriter.file([
        page, I(picture: Self.solid(200, 150, [9, 9, 9]), tile: 256),
      ])
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(twoPages), spec: ValidSpec(ThumbnailSpec(width: 100, height: 100, format: .png)))
      let shown = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
      #expect(Array(shown.pixels[0..<3]) == [200, 0, 0])
    }

    @Test(
      "1-, 2- and 4-bit grey, black or white as zero, at widths that end mid-byte",
      arguments: [1, 2, 4], [0, 1])
    func packedGrey(bits: Int, photometric: Int) throws {
      let (width, height) = (29, 3)
      var random = SeededRandom(seed: UInt64(bits * 10 + photometric))
      let levels = 1 << bits
      let values = (0..<width * height).map { _ in Int(random.next() % UInt64(levels)) }
      var stored: [UInt8] = []
      for y in 0..<height {
        var row = [UInt8](repeating: 0, count: (width * bits + 7) / 8)
        for x in 0..<width {
          let bit = x * bits
          row[bit / 8] |= UInt8(values[y * width + x] << (8 - bits - bit % 8))
        }
        stored += row
      }
      var b = RawFixtures.Builder()
      let strip = b.blob(stored)
      let ifd0 = b.directory([
        (256, 4, [width]), (257, 4, [height]), (258, 3, [bits]), (259, 3, [1]),
        (262, 3, [photometric]), (273, 4, [strip]), (277, 3, [1]), (278, 4, [height]),
        (279, 4, [stored.count]),
      ])
      let decoded = try thumbnailer.decodeFullResolution(.bytes(b.finish(ifd0: ifd0)))
      let expected = values.map { value -> UInt8 in
        let grey = UInt8((value * 255 + (levels - 1) / 2) / (levels - 1))
        return photometric == 0 ? 255 - grey : grey
      }
      #expect(decoded.width == width && decoded.height == height)
      #expect(
        stride(from: 0, to: decoded.pixels.count, by: decoded.channels).map { decoded.pixels[$0] }
          == expected)
    }

    @Test(
      "JPEG strips decode at a DCT scale (the JPEG decoder's), the same picture libtiff's full decode gives",
      arguments: [
        "tiff-valid/image-tiff/quad-jpeg.tif",
        "tiff-valid/pillow/tiff_strip_ycbcr_jpeg_2x2_sampling.tif",
      ])
    func jpegStrips(_ relative: String) throws {
      let bytes = try Corpus.bytes(relative)
      let spec = ThumbnailSpec(width: 64, height: 64, format: .png)
      // The decode is a DCT scale of the page (1/2, 1/4 or 1/8), not the page.
      let estimate = try thumbnailer.estimate(.bytes(bytes), spec: ValidSpec(spec))
      #expect(
        [2, 4, 8].contains { estimate.decodeWidth == (estimate.sourceWidth + $0 - 1) / $0 },
        "\(estimate)")
      var full = thumbnailer
      full.shrinkOnLoad = false
      #expect(
        try full.estimate(.bytes(bytes), spec: ValidSpec(spec)).decodeWidth == estimate.sourceWidth)
      let scaled = try thumbnailer.decodeFullResolution(
        .bytes(thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec)).data))
      let reference = try thumbnailer.decodeFullResolution(
        .bytes(full.thumbnail(.bytes(bytes), spec: ValidSpec(spec)).data))
      #expect(scaled.width == reference.width && scaled.height == reference.height)
      #expect(ImageMetrics.psnr(scaled, reference) >= 35)
    }

    @Test("float samples: 0...1 as 8 bits, clamped outside it, NaN as 0")
    func floatSamples() throws {
      var b = RawFixtures.Builder()
      let values: [Float] = [.nan, 0.5, 2, -1]
      let strip = b.blob(values.flatMap { BMPWriter.le(Int($0.bitPattern), 4) })
      let ifd0 = b.directory([
        (256, 4, [4]), (257, 4, [1]), (258, 3, [32]), (259, 3, [1]), (262, 3, [1]),
        (273, 4, [strip]), (277, 3, [1]), (279, 4, [16]), (339, 3, [3]),
      ])
      let decoded = try thumbnailer.decodeFullResolution(.bytes(b.finish(ifd0: ifd0)))
      #expect(stride(from: 0, to: 12, by: 3).map { decoded.pixels[$0] } == [0, 128, 255, 0])
    }

    @Test(
      "a Group 3 page coded in one dimension without EOL codes (libtiff's coding of a known page, its EOLs taken out) reads back exactly"
    )
    func faxWithoutEOL() throws {
      // libtiff 4.5's Group 3 decoder looks for an EOL before every row and, finding none,
      // gives a blank page (the corpus's testfax3_bug54_1dnoEOL.tif is one such page).
      let (width, height) = (203, 61)
      var ink: [Bool] = []
      var packed: [UInt8] = []
      for y in 0..<height {
        var row = [UInt8](repeating: 0, count: (width + 7) / 8)
        for x in 0..<width {
          let on = (x * x + 3 * y * y) % 97 < 30 || (x / 13 + y / 7) % 5 == 0
          ink.append(on)
          if on { row[x / 8] |= 0x80 >> (x % 8) }
        }
        packed += row
      }
      let blank = Bitmap(
        pixels: [UInt8](repeating: 0, count: width * height), width: width, height: height,
        channels: 1)
      // White is zero (a fax page's photometric), one strip.
      var plain = TIFFWriter.Image(picture: blank, bits: 1, photometric: 0, rowsPerStrip: height)
      plain.encodedChunks = [packed]
      let directory = TestDaemon.makeDirectory()
      defer { try? FileManager.default.removeItem(atPath: directory) }
      try Data(TIFFWriter.file([plain])).write(to: URL(fileURLWithPath: directory + "/plain.tif"))
      let tiffcp = Process()
      tiffcp.executableURL = URL(fileURLWithPath: "/usr/bin/tiffcp")
      tiffcp.arguments = [
        "-c", "g3:1d", "-r", String(height), directory + "/plain.tif", directory + "/g3.tif",
      ]
      try tiffcp.run()
      tiffcp.waitUntilExit()
      let coded = try Self.firstStrip(
        of: Array(Data(contentsOf: URL(fileURLWithPath: directory + "/g3.tif"))))
      var page = plain
      page.compression = 3
      page.encodedChunks = [Self.withoutEOLs(coded)]
      #expect(page.encodedChunks![0].count < coded.count, "the EOL codes were there to take out")
      let decoded = try thumbnailer.decodeFullResolution(.bytes(TIFFWriter.file([page])))
      #expect(decoded.width == width && decoded.height == height)
      let wrong = (0..<width * height).filter {
        (decoded.pixels[$0 * decoded.channels] == 0) != ink[$0]
      }.count
      #expect(wrong == 0, "\(wrong) pixels differ")
    }

    /// The bytes of a little-endian TIFF's first strip.
    static func firstStrip(of bytes: [UInt8]) throws -> [UInt8] {
      func number(_ at: Int, _ size: Int) -> Int {
        (0..<size).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) }
      }
      let ifd = number(4, 4)
      var offset = 0
      var count = 0
      for entry in 0..<number(ifd, 2) {
        let at = ifd + 2 + 12 * entry
        let size = number(at + 2, 2) == 3 ? 2 : 4
        if number(at, 2) == 273 { offset = number(at + 8, size) }
        if number(at, 2) == 279 { count = number(at + 8, size) }
      }
      guard offset > 0, count > 0, offset + count <= bytes.count else { throw POSIXError(.EINVAL) }
      return Array(bytes[offset..<(offset + count)])
    }

    /// Group 3 codes with every EOL (11 zeros, then a one) taken out: no code of Modified
    /// Huffman holds more than 10 zeros in a row, even across two codes, so 11 zeros before a
    /// one are an EOL's, and any zeros before those end the code before it.
    static func withoutEOLs(_ bytes: [UInt8]) -> [UInt8] {
      var out: [UInt8] = []
      var byte: UInt8 = 0
      var filled = 0
      func put(_ bit: Bool) {
        byte = byte << 1 | (bit ? 1 : 0)
        filled += 1
        if filled == 8 {
          out.append(byte)
          (byte, filled) = (0, 0)
        }
      }
      var zeros = 0
      for value in bytes {
        for shift in (0..<8).reversed() {
          if value >> shift & 1 == 0 {
            zeros += 1
            continue
          }
          // An EOL is the last 11 zeros and this one; zeros before them end the code before.
          for _ in 0..<(zeros < 11 ? zeros : zeros - 11) { put(false) }
          if zeros < 11 { put(true) }
          zeros = 0
        }
      }
      while filled != 0 { put(false) }
      return out
    }

    @Test("a thumbnail streamed from the file equals the one made from memory")
    func fileEqualsMemory() throws {
      let path = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-tiff-\(UUID().uuidString.prefix(8)).tif").path
      defer { try? FileManager.default.removeItem(atPath: path) }
      let bytes = TIFFWriter.file([TIFFWriter.Image(picture: Self.picture, tile: 16)])
      try Data(bytes).write(to: URL(fileURLWithPath: path))
      let spec = ThumbnailSpec(width: 20, height: 20, format: .png)
      #expect(
        try thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
          == thumbnailer.thumbnail(.path(path), spec: ValidSpec(spec)))
    }
  }
}
