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
      #expect(try CorpusChecks.psnrAgainstAreaAverage(path) >= 35)
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
