import Testing

@testable import ImagePipeline

/// Placeholders apart from the daemon: the ThumbHash's shape, the stored form read back (and
/// nothing else read as one), and the final size any spec gives.
@Suite("Placeholder units")
struct PlaceholderUnitTests {
  static func solid(_ width: Int, _ height: Int, _ pixel: [UInt8]) -> [UInt8] {
    Array((0..<(width * height)).map { _ in pixel }.joined())
  }

  @Test("a ThumbHash: header bits for landscape and alpha, at most 25 bytes, the average colour")
  func hashShape() {
    let landscape = ThumbHash.encode(
      rgba: Self.solid(32, 16, [200, 40, 40, 255]), width: 32, height: 16)
    #expect(landscape.count <= 25 && landscape.count >= 5)
    #expect(landscape[4] & 0x80 != 0, "landscape bit")
    #expect(landscape[2] & 0x80 == 0, "no alpha")
    let clear = ThumbHash.encode(rgba: Self.solid(16, 32, [0, 0, 255, 100]), width: 16, height: 32)
    #expect(clear[2] & 0x80 != 0, "alpha bit")
    #expect(clear[4] & 0x80 == 0, "portrait")
    #expect(ThumbHash.encode(rgba: [], width: 0, height: 0).isEmpty)
    let colour = ThumbHash.dominantColour(
      rgba: Self.solid(4, 4, [10, 20, 30, 255]), width: 4, height: 4)
    #expect(colour == (10, 20, 30))
  }

  @Test("the stored form reads back exactly; a changed or cut byte never reads as another")
  func storedForm() throws {
    let placeholder = Placeholder(
      thumbHash: [1, 2, 3, 4, 5, 6], colour: 0x12_34_56, sourceWidth: 4000, sourceHeight: 3000,
      orientation: 6)
    let bytes = placeholder.encoded
    #expect(Placeholder(encoded: bytes) == placeholder)
    #expect(placeholder.colourHex == "#123456")
    for cut in 0..<bytes.count { #expect(Placeholder(encoded: Array(bytes.prefix(cut))) == nil) }
    var wrongVersion = bytes
    wrongVersion[0] = 2
    #expect(Placeholder(encoded: wrongVersion) == nil)
    var badOrientation = bytes
    badOrientation[4] = 9
    #expect(Placeholder(encoded: badOrientation) == nil)
    #expect(Placeholder(encoded: bytes + [0]) == nil)
  }

  @Test("the final size follows the thumbnailer's own plan, orientation included")
  func outputSize() throws {
    // Stored 4000x3000 with orientation 6: upright 3000x4000.
    let placeholder = Placeholder(
      thumbHash: [0], colour: 0, sourceWidth: 4000, sourceHeight: 3000, orientation: 6)
    #expect(placeholder.uprightSize == (3000, 4000))
    let contain = try #require(placeholder.outputSize(for: ThumbnailSpec(width: 300, height: 300)))
    #expect(contain == (225, 300))
    let cover = try #require(
      placeholder.outputSize(for: ThumbnailSpec(width: 300, height: 100, fit: .cover)))
    #expect(cover == (300, 100))
    let retina = try #require(
      placeholder.outputSize(for: ThumbnailSpec(width: 100, height: 0, scale: 2)))
    #expect(retina == (200, 267))
  }

  @Test(
    "a thumbnail without its placeholder (a disk hit) is named with one made from its pixels, of its own colour"
  )
  func placeholderOfAHit() throws {
    struct Nothing: DataLoading {
      func load(_ request: SourceRequest) async throws -> SourceResponse {
        throw PipelineError.queueFull
      }
      func currentValidator(of url: String, notBefore: ContinuousClock.Instant) -> SourceValidator?
      {
        nil
      }
    }
    let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: Nothing()))
    let red = try ImageEncoder.png(
      Bitmap(pixels: Self.solid(40, 20, [220, 20, 20]), width: 40, height: 20, channels: 3))
    let thumbnail = try Thumbnailer().thumbnail(
      .bytes(red), spec: ValidSpec(ThumbnailSpec(width: 40, height: 40, format: .png)))
    #expect(thumbnail.placeholder == nil)
    let named = try #require(pipeline.placeholder(for: "file:///a.png", rev: nil, of: thumbnail))
    #expect(named.colour >> 16 > 180 && named.colour & 0xFF < 60, "\(named.colourHex)")
    #expect(named.sourceWidth == 40 && named.sourceHeight == 20)
  }
}
