import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Photos {
  /// The fast path (shrink-on-load, block averaging, kernel) against an exact reference.
  @Suite("Resampling quality", .serialized)
  struct QualityTests {
    static let photos = Corpus.entries.filter { $0.kind == "photo" }.map(\.path)

    @Test(
      "fast path scores >= 35 dB against a full-resolution exact area average", arguments: photos)
    func fastPathMatchesReference(path: String) throws {
      #expect(try CorpusChecks.psnrAgainstAreaAverage(path) >= 35)
    }

    static let jpegPhotos = photos.filter {
      $0.lowercased().hasSuffix(".jpg") || $0.lowercased().hasSuffix(".jpeg")
    }

    /// A DCT-scaled decode rounds its size up: its last column and row cover fewer source
    /// pixels. Mapped as if the rounded size spanned the source, the picture slid by up to
    /// 0.3 output pixels towards its far edges (39 dB here for a 3872x2403 photo at 1/8).
    @Test(
      "shrink-on-load gives the full decode's thumbnail (>= 44 dB): no shift at any DCT scale",
      arguments: jpegPhotos)
    func shrinkOnLoadMatchesFullDecode(path: String) throws {
      let spec = ThumbnailSpec(width: 256, height: 256, format: .png)
      let scaled = try Thumbnailer().thumbnail(.path(Corpus.path(path)), spec: ValidSpec(spec))
      let full = try Thumbnailer(shrinkOnLoad: false).thumbnail(
        .path(Corpus.path(path)), spec: ValidSpec(spec))
      let psnr = ImageMetrics.psnr(
        ImageMetrics.flattened(try Thumbnailer().decodeFullResolution(.bytes(scaled.data))),
        ImageMetrics.flattened(try Thumbnailer().decodeFullResolution(.bytes(full.data))))
      #expect(psnr >= 44, "\(path): \(psnr) dB")
    }

    @Test(
      "WebP, GIF, HEIC and AVIF score >= 35 dB against a full decode's exact area average",
      arguments: Corpus.formatPhotos.map(\.path))
    func newFormatsMatchReference(path: String) throws {
      let psnr = try CorpusChecks.psnrAgainstAreaAverage(path)
      #expect(psnr >= 35, "\(path): \(psnr) dB")
    }
  }
}
