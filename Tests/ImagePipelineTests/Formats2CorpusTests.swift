import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Formats {
  /// The kinds of MANIFEST-formats2.tsv thumbd decodes itself do what the manifest says, from
  /// memory and streamed from the file.
  @Suite("Corpus manifest: BMP, ICO and the other second-round formats", .serialized)
  struct Formats2CorpusTests {
    let thumbnailer = Thumbnailer()
    let spec = ThumbnailSpec(width: 256, height: 256)

    /// decode-ok files that Debian's own library cannot read, and why. The manifest's
    /// cross-check read them with newer releases; thumbd refuses them with a typed error rather
    /// than show what the older library makes of them.
    static let beyondDebianLibraries: [String: String] = [:]

    @Test(
      "decode-ok files give a thumbnail of the right upright size",
      arguments: Corpus.nativeFormats2Entries(expected: "decode-ok"))
    func decodesValidFile(entry: Corpus.Entry) throws {
      if let kind = Self.beyondDebianLibraries[entry.path] {
        #expect {
          _ = try thumbnailer.thumbnail(.bytes(Corpus.bytes(entry.path)), spec: ValidSpec(spec))
        } throws: { ($0 as? ThumbnailError)?.kind == kind }
        return
      }
      try CorpusChecks.expectDecodes(entry, thumbnailer: CorpusChecks.patient, box: 256)
    }

    @Test(
      "must-reject files give a typed error", .timeLimit(.minutes(1)),
      arguments: Corpus.nativeFormats2Entries(expected: "must-reject"))
    func rejectsBadFile(entry: Corpus.Entry) throws {
      CorpusChecks.expectRejected(entry, thumbnailer: thumbnailer, box: 256)
    }

    @Test(
      "either files decode or fail cleanly, in bounded time", .timeLimit(.minutes(1)),
      arguments: Corpus.nativeFormats2Entries(expected: "either"))
    func handlesPolicyFile(entry: Corpus.Entry) throws {
      try CorpusChecks.expectHandled(entry, thumbnailer: thumbnailer, box: 256)
    }
  }
}
