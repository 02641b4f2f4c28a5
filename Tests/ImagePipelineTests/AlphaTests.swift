import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Photos {
  /// Transparency is resampled premultiplied: no dark fringes, and alpha picks PNG.
  @Suite("Alpha", .serialized)
  struct AlphaTests {
    static let transparentPngSuite = Corpus.entries.filter {
      $0.path.hasPrefix("png-valid/pngsuite/")
        && ($0.note.contains("alpha") || $0.note.contains("tRNS"))
    }.map(\.path)

    let thumbnailer = Thumbnailer()

    /// Opaque red on the left half, fully transparent black on the right.
    static func redBesideTransparentBlack(width: Int, height: Int) -> Bitmap {
      var pixels = [UInt8](repeating: 0, count: width * height * 4)
      for y in 0..<height {
        for x in 0..<(width / 2) {
          pixels.replaceSubrange(
            ((y * width + x) * 4)..<((y * width + x) * 4 + 4), with: [255, 0, 0, 255])
        }
      }
      return Bitmap(pixels: pixels, width: width, height: height, channels: 4)
    }

    @Test(
      "transparent black never darkens visible red",
      arguments: [(64, 16), (61, 13), (300, 7), (33, 32)])
    func noFringeOnSyntheticEdge(source: Int, box: Int) throws {
      let png = try ImageEncoder.png(Self.redBesideTransparentBlack(width: source, height: source))
      for filter in ResamplingFilter.allCases {
        let thumbnail = try Thumbnailer(filter: filter).thumbnail(
          .bytes(png), spec: ValidSpec(ThumbnailSpec(width: box, height: box)))
        #expect(thumbnail.format == .png && thumbnail.hasAlpha)
        let image = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
        for i in 0..<(image.width * image.height) where image.pixels[i * 4 + 3] > 0 {
          #expect(image.pixels[i * 4] >= 250, "red channel darkened at pixel \(i) with \(filter)")
          #expect(image.pixels[i * 4 + 1] <= 5 && image.pixels[i * 4 + 2] <= 5)
        }
      }
    }

    /// Uses the area kernel so the comparison with the exact premultiplied reference is tight: a
    /// sharp kernel legitimately differs from an area average at every edge. The block stage and
    /// premultiplication are shared by all kernels; the synthetic edge above covers each kernel.
    @Test(
      "RGBA PngSuite images show no dark fringe against a premultiplied reference",
      arguments: transparentPngSuite)
    func noFringeOnPngSuite(path: String) throws {
      let thumbnail = try Thumbnailer(filter: .area).thumbnail(
        .path(Corpus.path(path)),
        spec: ValidSpec(ThumbnailSpec(width: 16, height: 16, format: .png)))
      let image = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
      let full = try thumbnailer.decodeFullResolution(.path(Corpus.path(path)))
      guard image.channels == 4, full.channels == 4 else {
        // Fully opaque after all (tRNS colour absent): nothing to fringe.
        #expect(!thumbnail.hasAlpha)
        return
      }
      let reference = ImageMetrics.areaAverage(full, width: image.width, height: image.height)
      #expect(ImageMetrics.worstDarkening(image, reference: reference) <= 4)
    }

    @Test("the darkening check catches a straight-alpha average")
    func checkDetectsFringe() throws {
      let source = Self.redBesideTransparentBlack(width: 64, height: 64)
      let good = ImageMetrics.areaAverage(source, width: 13, height: 13)
      let naive = ImageMetrics.areaAverage(source, width: 13, height: 13, premultiplied: false)
      #expect(ImageMetrics.worstDarkening(naive, reference: good) > 4)
    }

    @Test("auto picks PNG for transparency and JPEG once alpha is all opaque")
    func autoFormatFollowsAlpha() throws {
      let transparent = try ImageEncoder.png(Self.redBesideTransparentBlack(width: 40, height: 40))
      #expect(
        try thumbnailer.thumbnail(
          .bytes(transparent), spec: ValidSpec(ThumbnailSpec(width: 20, height: 20))
        )
        .format
          == .png)
      let opaqueRGBA = Bitmap(
        pixels: (0..<(40 * 40)).flatMap { _ in [UInt8(200), 120, 40, 255] }, width: 40, height: 40,
        channels: 4)
      let opaque = try thumbnailer.thumbnail(
        .bytes(try ImageEncoder.png(opaqueRGBA)),
        spec: ValidSpec(ThumbnailSpec(width: 20, height: 20)))
      #expect(opaque.format == .jpeg && !opaque.hasAlpha)
    }

    @Test("JPEG output composites transparency over white")
    func jpegFlattensOverWhite() throws {
      let transparent = try ImageEncoder.png(Self.redBesideTransparentBlack(width: 40, height: 40))
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(transparent), spec: ValidSpec(ThumbnailSpec(width: 40, height: 40, format: .jpeg)))
      let image = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
      // Far right column: was transparent black, must now be white, not black.
      let p = (20 * 40 + 39) * 3
      #expect(image.pixels[p] > 240 && image.pixels[p + 1] > 240 && image.pixels[p + 2] > 240)
    }
  }
}
