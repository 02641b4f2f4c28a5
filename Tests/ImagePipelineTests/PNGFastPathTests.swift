import Testing

@testable import ImagePipeline
@testable import TestSupport

extension DecodeSuites.Photos {
  /// The fast IDAT path (png_fast.c) must be indistinguishable from libpng's own rows.
  @Suite("PNG fast path", .serialized)
  struct PNGFastPathTests {
    static let pngs = Corpus.entries.filter {
      $0.path.lowercased().hasSuffix(".png") || $0.note.contains("PNG data")
    }

    @Test(
      "every corpus PNG decodes to the same pixels, or fails the same way, on both paths",
      arguments: pngs)
    func samePixelsBothPaths(entry: Corpus.Entry) throws {
      var slow = Thumbnailer()
      slow.pngFastPath = false
      let fast = Thumbnailer()
      let bytes = try Corpus.bytes(entry.path)
      let expected = Result { () throws(ThumbnailError) in
        try slow.decodeFullResolution(.bytes(bytes))
      }
      let actual = Result { () throws(ThumbnailError) in
        try fast.decodeFullResolution(.bytes(bytes))
      }
      switch (expected, actual) {
      case (.success(let a), .success(let b)):
        #expect(a == b)
      case (.failure(let a), .failure(let b)):
        #expect(a.kind == b.kind)
      default:
        Issue.record("libpng: \(expected), fast path: \(actual)")
      }
    }

    @Test("damage inside the image data is caught on the fast path")
    func damagedImageData() throws {
      let original = try Corpus.bytes("png-valid/large/large.png")
      var slow = Thumbnailer()
      slow.pngFastPath = false
      // Flip bytes at a few places in the middle of the IDAT data, and cut the file short.
      for offset in [original.count / 3, original.count / 2, original.count - 20] {
        var damaged = original
        damaged[offset] ^= 0x5A
        for thumbnailer in [Thumbnailer(), slow] {
          #expect(throws: ThumbnailError.self) {
            _ = try thumbnailer.decodeFullResolution(.bytes(damaged))
          }
        }
      }
      for thumbnailer in [Thumbnailer(), slow] {
        #expect {
          _ = try thumbnailer.decodeFullResolution(
            .bytes(Array(original.prefix(original.count / 2))))
        } throws: { ($0 as? ThumbnailError)?.kind == "truncated" }
      }
    }
  }
}
