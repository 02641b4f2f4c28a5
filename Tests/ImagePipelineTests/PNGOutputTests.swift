import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Photos {
  /// How PNG thumbnails are coded: photographs (JPEG, HEIC and AVIF sources) with Paeth rows
  /// and zlib's run-length strategy, graphics with the adaptive filters and LZ77.
  @Suite("PNG output coding", .serialized)
  struct PNGOutputTests {
    /// FLEVEL of the first IDAT's zlib header: 0 for Z_RLE (and levels 0-1), 1 for levels 2-5.
    static func zlibLevelFlag(_ png: [UInt8]) throws -> Int {
      let stream = try #require(PNGChunks.firstImageData(ofPNG: png))
      try #require(stream.count >= 2)
      return Int(stream[stream.startIndex + 1]) >> 6
    }

    static let photos = Corpus.entries.filter {
      $0.kind == "photo" && $0.path.lowercased().hasSuffix(".jpg")
    }.map(\.path).prefix(8)

    @Test("photos' PNGs are run-length coded, the same pixels, and no larger in all")
    func photographs() throws {
      let spec = ThumbnailSpec(width: 128, height: 128, format: .png)
      var (ours, usual) = (0, 0)
      for path in Self.photos {
        let thumbnail = try Thumbnailer().thumbnail(.path(Corpus.path(path)), spec: ValidSpec(spec))
        #expect(try Self.zlibLevelFlag(thumbnail.data) == 0, "\(path)")
        let pixels = try Thumbnailer().decodeFullResolution(.bytes(thumbnail.data))
        let adaptive = try ImageEncoder.png(pixels, level: 2)
        #expect(try Self.zlibLevelFlag(adaptive) == 1)
        #expect(try Thumbnailer().decodeFullResolution(.bytes(adaptive)) == pixels)
        // One photo may come out a little larger; the set may not.
        #expect(
          Double(thumbnail.data.count) <= Double(adaptive.count) * 1.06,
          "\(path): \(thumbnail.data.count) bytes against \(adaptive.count)")
        ours += thumbnail.data.count
        usual += adaptive.count
      }
      #expect(ours <= usual, "\(ours) bytes against \(usual) with the adaptive filters")
    }

    @Test("a graphic's PNG keeps the adaptive filters and LZ77 at the requested level")
    func graphics() throws {
      let spec = ThumbnailSpec(width: 64, height: 64, format: .png)
      let thumbnail = try Thumbnailer().thumbnail(
        .path(Corpus.path("png-valid/libpng-testpngs/gray-8-sRGB.png")), spec: ValidSpec(spec))
      #expect(try Self.zlibLevelFlag(thumbnail.data) == 1)
    }
  }
}
