import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Formats {
  /// What the corpus cannot show with a known answer: first frames of animations, WebP EXIF
  /// and HEIF irot/imir orientation on a known picture, alpha edges of each new format.
  @Suite("WebP, GIF and HEIF decoding", .serialized)
  struct FormatTests {
    let thumbnailer = Thumbnailer()

    private func pixels(_ bytes: [UInt8], box: Int) throws -> Bitmap {
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: box, height: box, format: .png)))
      return try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
    }

    private func pixel(_ image: Bitmap, _ x: Int, _ y: Int) -> [Int] {
      let at = (y * image.width + x) * image.channels
      return image.pixels[at..<(at + image.channels)].map(Int.init)
    }

    private func solid(_ rgb: [UInt8], width: Int, height: Int) -> Bitmap {
      Bitmap(
        pixels: (0..<(width * height)).flatMap { _ in rgb }, width: width, height: height,
        channels: 3)
    }

    static let palette: [(UInt8, UInt8, UInt8)] = [(255, 0, 0), (0, 0, 255), (0, 255, 0)]

    @Test("a GIF gives its first frame, not a later one", arguments: [false, true])
    func gifFirstFrame(interlaced: Bool) throws {
      let red = FormatFixtures.GIFFrame(
        width: 16, height: 16, indices: .init(repeating: 0, count: 256), interlaced: interlaced)
      let blue = FormatFixtures.GIFFrame(
        width: 16, height: 16, indices: .init(repeating: 1, count: 256))
      let gif = FormatFixtures.gif(
        width: 16, height: 16, palette: Self.palette, frames: [red, blue])
      let image = try pixels(gif, box: 16)
      #expect(image.channels == 3)
      for y in 0..<16 { for x in 0..<16 { #expect(pixel(image, x, y) == [255, 0, 0]) } }
    }

    @Test("an interlaced GIF's rows land in their places")
    func gifInterlacedRows() throws {
      // Row r has colour r % 3: any pass put in the wrong place shows.
      let indices = (0..<(11 * 11)).map { UInt8(($0 / 11) % 3) }
      let frame = FormatFixtures.GIFFrame(
        width: 11, height: 11, indices: indices, interlaced: true)
      let image = try pixels(
        FormatFixtures.gif(width: 11, height: 11, palette: Self.palette, frames: [frame]), box: 11)
      for y in 0..<11 {
        let c = Self.palette[y % 3]
        #expect(pixel(image, 5, y) == [Int(c.0), Int(c.1), Int(c.2)], "row \(y)")
      }
    }

    @Test("a GIF frame smaller than its screen sits on transparency; its transparent index too")
    func gifFrameOnCanvas() throws {
      var indices = [UInt8](repeating: 2, count: 8 * 8)
      indices[0] = 1  // drawn transparent below
      let frame = FormatFixtures.GIFFrame(
        left: 4, top: 4, width: 8, height: 8, indices: indices, transparent: 1)
      let gif = FormatFixtures.gif(width: 16, height: 16, palette: Self.palette, frames: [frame])
      let image = try pixels(gif, box: 16)
      #expect(image.channels == 4)
      #expect(pixel(image, 0, 0)[3] == 0)
      #expect(pixel(image, 15, 15)[3] == 0)
      #expect(pixel(image, 4, 4)[3] == 0, "the transparent index")
      #expect(pixel(image, 8, 8) == [0, 255, 0, 255])
    }

    @Test("a GIF frame reaching past the screen is clipped")
    func gifFrameClipped() throws {
      let frame = FormatFixtures.GIFFrame(
        left: 8, top: 8, width: 16, height: 16, indices: .init(repeating: 0, count: 256))
      let image = try pixels(
        FormatFixtures.gif(width: 16, height: 16, palette: Self.palette, frames: [frame]), box: 16)
      #expect(image.width == 16 && image.height == 16)
      #expect(pixel(image, 12, 12) == [255, 0, 0, 255])
      #expect(pixel(image, 2, 2)[3] == 0)
    }

    @Test("an interlaced frame far larger than its screen keeps only the part on the screen")
    func gifLargeInterlacedFrame() throws {
      // Row r has colour r % 3, like the test above; the frame is 300x300 on an 8x8 screen.
      let indices = (0..<(300 * 300)).map { UInt8(($0 / 300) % 3) }
      func gif(interlaced: Bool) -> [UInt8] {
        let frame = FormatFixtures.GIFFrame(
          width: 300, height: 300, indices: indices, interlaced: interlaced)
        return FormatFixtures.gif(width: 8, height: 8, palette: Self.palette, frames: [frame])
      }
      let image = try pixels(gif(interlaced: true), box: 8)
      for y in 0..<8 {
        let c = Self.palette[y % 3]
        #expect(pixel(image, 3, y) == [Int(c.0), Int(c.1), Int(c.2)], "row \(y)")
      }
      // The buffer of the interlaced frame is its 8x8 visible part, not 90,000 bytes.
      let spec = ThumbnailSpec(width: 8, height: 8)
      let interlaced = try thumbnailer.estimate(
        .bytes(gif(interlaced: true)), spec: ValidSpec(spec))
      let progressive = try thumbnailer.estimate(
        .bytes(gif(interlaced: false)), spec: ValidSpec(spec))
      #expect(interlaced.bytes - progressive.bytes <= 64)
    }

    @Test("a GIF frame over the pixel limit is too large, with the frame's size, not corrupt")
    func gifFrameOverPixelLimit() throws {
      let frame = FormatFixtures.GIFFrame(
        width: 300, height: 300, indices: [UInt8](repeating: 1, count: 300 * 300))
      let gif = FormatFixtures.gif(width: 8, height: 8, palette: Self.palette, frames: [frame])
      var limits = DecodingLimits()
      limits.maxPixels = 10_000
      #expect(
        throws: ThumbnailError.tooLarge(
          width: 300, height: 300,
          message: "its first frame of 300x300 is 90000 pixels, over the limit of 10000 pixels")
      ) {
        try Thumbnailer(limits: limits).thumbnail(
          .bytes(gif), spec: ValidSpec(ThumbnailSpec(width: 8, height: 8)))
      }
    }

    @Test("an animated WebP gives its first frame, placed on its canvas")
    func webpFirstFrame() throws {
      let red = try ImageEncoder.webp(solid([255, 0, 0], width: 16, height: 16), lossless: true)
      let blue = try ImageEncoder.webp(solid([0, 0, 255], width: 32, height: 32), lossless: true)
      let full = FormatFixtures.animatedWebP(
        width: 32, height: 32,
        frames: [(red, 8, 8, 16, 16), (blue, 0, 0, 32, 32)])
      let image = try pixels(full, box: 32)
      #expect(image.channels == 4)
      #expect(pixel(image, 16, 16) == [255, 0, 0, 255])
      #expect(pixel(image, 2, 2)[3] == 0, "outside the first frame: the transparent canvas")
      #expect(pixel(image, 30, 30)[3] == 0)
      // Scaled: the frame stays in the middle half.
      let small = try pixels(full, box: 8)
      #expect(pixel(small, 4, 4)[0] > 200 && pixel(small, 4, 4)[3] > 200)
      #expect(pixel(small, 0, 0)[3] == 0)
    }

    /// Four quadrants of distinct colours: any flip or turn moves one.
    static func quadrants(width: Int, height: Int) -> Bitmap {
      let colours: [[UInt8]] = [[255, 0, 0], [0, 200, 0], [0, 0, 255], [255, 255, 255]]
      var pixels: [UInt8] = []
      for y in 0..<height {
        for x in 0..<width {
          pixels += colours[(y < height / 2 ? 0 : 2) + (x < width / 2 ? 0 : 1)]
        }
      }
      return Bitmap(pixels: pixels, width: width, height: height, channels: 3)
    }

    /// Where stored pixel (x, y) of a w x h image shows under EXIF orientation n.
    static func shown(_ x: Int, _ y: Int, _ w: Int, _ h: Int, _ n: Int) -> (Int, Int) {
      switch n {
      case 2: (w - 1 - x, y)
      case 3: (w - 1 - x, h - 1 - y)
      case 4: (x, h - 1 - y)
      case 5: (y, x)
      case 6: (h - 1 - y, x)
      case 7: (h - 1 - y, w - 1 - x)
      case 8: (y, w - 1 - x)
      default: (x, y)
      }
    }

    /// The thumbnail shows each quadrant's colour where orientation n puts it.
    private func expectOriented(
      _ bytes: [UInt8], stored: Bitmap, orientation n: Int, tolerance: Int
    ) throws {
      let image = try pixels(bytes, box: 64)
      let (w, h) = (stored.width, stored.height)
      let upright = n >= 5 ? (h, w) : (w, h)
      #expect(image.width == upright.0 && image.height == upright.1, "orientation \(n)")
      for (qx, qy) in [
        (w / 4, h / 4), (3 * w / 4, h / 4), (w / 4, 3 * h / 4), (3 * w / 4, 3 * h / 4),
      ] {
        let (sx, sy) = Self.shown(qx, qy, w, h, n)
        let want = pixel(stored, qx, qy)
        let got = pixel(image, sx, sy).prefix(3)
        #expect(
          zip(want, got).allSatisfy { abs($0 - $1) <= tolerance },
          "orientation \(n): stored (\(qx),\(qy)) shows at (\(sx),\(sy)) as \(Array(got))")
      }
    }

    @Test("WebP EXIF orientation 1...8 comes out upright", arguments: 1...8)
    func webpOrientation(n: Int) throws {
      let stored = Self.quadrants(width: 48, height: 32)
      let still = try ImageEncoder.webp(stored, lossless: true)
      let bytes = FormatFixtures.webp(still, width: 48, height: 32, orientation: n)
      try expectOriented(bytes, stored: stored, orientation: n, tolerance: 2)
    }

    @Test(
      "HEIF irot/imir (AVIF) 1...8 come out upright, EXIF never applied on top",
      arguments: 1...8)
    func heifTransforms(n: Int) throws {
      let stored = Self.quadrants(width: 48, height: 32)
      let bytes = try ImageEncoder.avif(stored, quality: 90, orientation: n)
      try expectOriented(bytes, stored: stored, orientation: n, tolerance: 40)
    }

    /// Opaque red on the left, transparent black on the right, in each format with alpha.
    static let alphaEncodings: [String] = ["webp-lossy", "webp-lossless", "avif"]

    @Test("alpha edges show no dark fringe against the full decode", arguments: alphaEncodings)
    func noFringe(encoding: String) throws {
      let source = DecodeSuites.Photos.AlphaTests.redBesideTransparentBlack(width: 64, height: 64)
      let bytes =
        switch encoding {
        case "webp-lossy": try ImageEncoder.webp(source, quality: 90, exact: true)
        case "webp-lossless": try ImageEncoder.webp(source, exact: true, lossless: true)
        default: try ImageEncoder.avif(source, quality: 90)
        }
      for filter in ResamplingFilter.allCases {
        let thumbnail = try Thumbnailer(filter: filter).thumbnail(
          .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 13, height: 13, format: .png)))
        #expect(thumbnail.hasAlpha)
        let image = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
        let full = try thumbnailer.decodeFullResolution(.bytes(bytes))
        let reference = ImageMetrics.areaAverage(full, width: 13, height: 13)
        #expect(
          ImageMetrics.worstDarkening(image, reference: reference) <= 8, "\(encoding) \(filter)")
      }
    }

    @Test("a WebP or HEIF file read whole is refused past the decoder-memory cap, not buffered")
    func wholeFileReadIsCapped() throws {
      for path in ["webp-valid/libwebp-test-data/bryce.webp", "heif-valid/libheif/example.heic"] {
        let size = try Corpus.bytes(path).count
        let tight = Thumbnailer(limits: DecodingLimits(maxDecoderMemory: size - 1))
        #expect("\(path)") {
          _ = try tight.thumbnail(
            .path(Corpus.path(path)), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)))
        } throws: { ($0 as? ThumbnailError)?.kind == "too_large" }
        let enough = Thumbnailer(limits: DecodingLimits(maxDecoderMemory: size + (64 << 20)))
        _ = try enough.thumbnail(
          .path(Corpus.path(path)), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)))
      }
    }

    @Test("WebP and AVIF output keep alpha; JPEG output flattens it")
    func outputAlpha() throws {
      let png = try ImageEncoder.png(
        DecodeSuites.Photos.AlphaTests.redBesideTransparentBlack(width: 40, height: 40))
      for format in [OutputFormat.webp, .avif] {
        let thumbnail = try thumbnailer.thumbnail(
          .bytes(png), spec: ValidSpec(ThumbnailSpec(width: 20, height: 20, format: format)))
        #expect(thumbnail.hasAlpha && thumbnail.format.rawValue == format.rawValue)
        let image = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
        #expect(image.channels == 4 && pixel(image, 18, 10)[3] < 10 && pixel(image, 2, 10)[3] > 245)
      }
    }
  }
}
