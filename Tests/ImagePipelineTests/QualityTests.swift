import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites {
  /// The fast path (shrink-on-load, block averaging, kernel) against an exact reference.
  @Suite("Resampling quality", .serialized)
  struct QualityTests {
    static let photos = Corpus.entries.filter { $0.kind == "photo" }.map(\.path)

    @Test(
      "fast path scores >= 35 dB against a full-resolution exact area average", arguments: photos)
    func fastPathMatchesReference(path: String) throws {
      let thumbnailer = Thumbnailer()
      let fast = try thumbnailer.thumbnail(
        contentsOf: Corpus.path(path), spec: ThumbnailSpec(width: 256, height: 256, format: .png))
      let full = try thumbnailer.decodeFullResolution(contentsOf: Corpus.path(path))
      let reference = ImageMetrics.areaAverage(full, width: fast.width, height: fast.height)
      let psnr = ImageMetrics.psnr(try thumbnailer.decodeFullResolution(of: fast.data), reference)
      #expect(psnr >= 35)
    }

    /// The WebP, GIF, HEIC and AVIF images of the corpus large enough to be photographs
    /// (0.25 MP or more), whatever their content.
    static let formatPhotos = Corpus.formatEntries(expected: "decode-ok").filter {
      ["webp-valid", "gif-valid", "heif-valid"].contains($0.kind)
        && ($0.storedSize.map { $0.width * $0.height >= 250_000 } ?? false)
    }.map(\.path)

    @Test(
      "WebP, GIF, HEIC and AVIF score >= 35 dB against a full decode's exact area average",
      arguments: formatPhotos)
    func newFormatsMatchReference(path: String) throws {
      let thumbnailer = Thumbnailer()
      let fast = try thumbnailer.thumbnail(
        contentsOf: Corpus.path(path), spec: ThumbnailSpec(width: 256, height: 256, format: .png))
      let full = try thumbnailer.decodeFullResolution(contentsOf: Corpus.path(path))
      let reference = ImageMetrics.areaAverage(full, width: fast.width, height: fast.height)
      // Transparent pixels compared as shown, over grey: their colour is invisible.
      let psnr = ImageMetrics.psnr(
        ImageMetrics.flattened(try thumbnailer.decodeFullResolution(of: fast.data)),
        ImageMetrics.flattened(reference))
      #expect(psnr >= 35, "\(path): \(psnr) dB")
    }
  }
}
