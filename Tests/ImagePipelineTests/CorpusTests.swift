import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Photos {
  /// Every file of the shared corpus does what MANIFEST.tsv says it must. Serialized, like the
  /// other suites of synchronous decoding: hundreds of decode cases queued at once on a 2-core
  /// machine's two cooperative threads would delay every other test's continuations for tens of
  /// seconds, past the deadlines those tests check.
  @Suite("Corpus manifest", .serialized)
  struct CorpusTests {
    let thumbnailer = Thumbnailer()
    let spec = ThumbnailSpec(width: 256, height: 256)

    @Test(
      "decode-ok files give a thumbnail of the right upright size",
      arguments: Corpus.entries(expected: "decode-ok"))
    func decodesValidFile(entry: Corpus.Entry) throws {
      try CorpusChecks.expectUprightThumbnail(entry, thumbnailer: CorpusChecks.patient, box: 256)
    }

    @Test(
      "decode-ok files stream from disk the same as from memory",
      arguments: Corpus.entries(expected: "decode-ok").filter {
        $0.kind == "photo" || $0.kind == "exif-orientation"
      })
    func streamsFromDisk(entry: Corpus.Entry) throws {
      let thumbnailer = CorpusChecks.patient
      let fromFile = try thumbnailer.thumbnail(.path(entry.url), spec: ValidSpec(spec))
      let fromMemory = try thumbnailer.thumbnail(
        .bytes(Corpus.bytes(entry.path)), spec: ValidSpec(spec))
      #expect(fromFile == fromMemory)
    }

    @Test(
      "must-reject files give a typed error", .timeLimit(.minutes(1)),
      arguments: Corpus.entries(expected: "must-reject"))
    func rejectsBadFile(entry: Corpus.Entry) throws {
      CorpusChecks.expectRejected(entry, thumbnailer: thumbnailer, box: 256)
    }

    @Test(
      "either files decode or fail cleanly, in bounded time", .timeLimit(.minutes(1)),
      arguments: Corpus.entries(expected: "either"))
    func handlesPolicyFile(entry: Corpus.Entry) throws {
      let bytes = try Corpus.bytes(entry.path)
      for limits in [DecodingLimits(), DecodingLimits(acceptDamaged: true)] {
        do {
          let thumbnail = try Thumbnailer(limits: limits).thumbnail(
            .bytes(bytes), spec: ValidSpec(spec))
          #expect(thumbnail.width > 0 && thumbnail.width <= 256)
          #expect(thumbnail.height > 0 && thumbnail.height <= 256)
        } catch {
          #expect(!error.kind.isEmpty)
        }
      }
    }

    @Test("the 613-byte progressive bomb is refused from its header")
    func refusesDecompressionBomb() throws {
      let bomb = try #require(
        Corpus.entries.first { $0.dimensions == "49157x27397" }, "bomb missing from the corpus")
      #expect(
        throws: ThumbnailError.tooLarge(
          width: 49157, height: 27397,
          message: "49157x27397 is 1346754329 pixels, over the limit of 100000000 pixels")
      ) {
        _ = try thumbnailer.thumbnail(.bytes(Corpus.bytes(bomb.path)), spec: ValidSpec(spec))
      }
    }

    @Test("PNG bytes behind a .jpg name are recognised by their signature")
    func sniffsContentNotName() throws {
      let thumbnail = try thumbnailer.thumbnail(
        .path(Corpus.path("adversarial/thumbor/feature_detection.jpg")), spec: ValidSpec(spec))
      #expect(thumbnail.sourceWidth == 300 && thumbnail.sourceHeight == 225)
    }
  }
}
