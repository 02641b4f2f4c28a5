import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Formats {
  /// Every file of MANIFEST-formats.tsv (WebP, GIF, HEIC/AVIF, ICC-tagged) does what the
  /// manifest says: from memory and streamed from its file.
  @Suite("Corpus manifest: WebP, GIF, HEIF", .serialized)
  struct FormatCorpusTests {
    let thumbnailer = Thumbnailer()
    let spec = ThumbnailSpec(width: 256, height: 256)

    @Test(
      "decode-ok files give a thumbnail of the right upright size",
      arguments: Corpus.formatEntries(expected: "decode-ok"))
    func decodesValidFile(entry: Corpus.Entry) throws {
      try CorpusChecks.expectDecodes(entry, thumbnailer: CorpusChecks.patient, box: 256)
    }

    @Test(
      "must-reject files give a typed error", .timeLimit(.minutes(1)),
      arguments: Corpus.formatEntries(expected: "must-reject"))
    func rejectsBadFile(entry: Corpus.Entry) throws {
      CorpusChecks.expectRejected(entry, thumbnailer: thumbnailer, box: 256)
    }

    @Test(
      "either files decode or fail cleanly, in bounded time", .timeLimit(.minutes(1)),
      arguments: Corpus.formatEntries(expected: "either"))
    func handlesPolicyFile(entry: Corpus.Entry) throws {
      try CorpusChecks.expectHandled(entry, thumbnailer: thumbnailer, box: 256)
    }

    @Test("declared sizes over the pixel limit are refused from the header, before decoding")
    func refusesHugeHeaders() throws {
      for path in [
        "gif-corrupt/gdk-pixbuf/bug785973_disabled.gif",  // a 4270 MP screen in 100 KB
        "heif-valid/libvips/17000x17000.avif",  // 289 MP in 1340 bytes
      ] {
        #expect("\(path)") {
          _ = try thumbnailer.thumbnail(.bytes(Corpus.bytes(path)), spec: ValidSpec(spec))
        } throws: { ($0 as? ThumbnailError)?.kind == "too_large" }
      }
    }

    @Test("the sniffer names each new format from its bytes")
    func sniffsEachFormat() throws {
      let cases: [(String, SourceFormat)] = [
        ("webp-valid/libwebp-test-data/bryce.webp", .webp),
        ("gif-valid/giflib/porsche.gif", .gif),
        ("heif-valid/libheif/example.heic", .heic),
        ("heif-valid/av1-avif/fox.profile0.10bpc.yuv420.avif", .avif),
      ]
      for (path, format) in cases {
        #expect(SourceFormat.sniff(try Corpus.bytes(path)) == format, "\(path)")
      }
    }
  }
}
