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
  }
}
