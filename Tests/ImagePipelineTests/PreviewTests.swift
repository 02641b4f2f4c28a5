import Foundation
import Testing
import ThumbSystem

@testable import ImagePipeline
@testable import TestSupport

extension DecodeSuites.Photos {
  /// Previews (ic_request.preview) and the prefix watch that finds them in a download's first
  /// bytes: a JPEG's EXIF thumbnail, a progressive JPEG's first DC scans, a HEIF's embedded
  /// thumbnail.
  @Suite("Previews from early pictures")
  struct PreviewTests {
    static let spec = ThumbnailSpec(width: 256, height: 256)

    /// The prefix watch fed `chunk` bytes at a time, as a download arrives.
    static func readySize(_ bytes: [UInt8], chunk: Int) -> PreviewPrefix.Verdict {
      var watch = PreviewPrefix()
      var end = 0
      while end < bytes.count {
        end = min(bytes.count, end + chunk)
        let verdict = bytes.withUnsafeBytes {
          watch.look(at: UnsafeRawBufferPointer(rebasing: $0[..<end]))
        }
        if verdict != .more { return verdict }
      }
      return .more
    }

    /// The full thumbnail at the preview's size, and the PSNR of the preview against it.
    static func likeness(_ preview: Thumbnail, of bytes: [UInt8]) throws -> Double {
      let full = try Thumbnailer().thumbnail(
        .bytes(bytes),
        spec: ValidSpec(ThumbnailSpec(width: preview.width, height: preview.height, fit: .fill)))
      let thumbnailer = Thumbnailer()
      return ImageMetrics.psnr(
        try thumbnailer.decodeFullResolution(.bytes(preview.data)),
        try thumbnailer.decodeFullResolution(.bytes(full.data)))
    }

    @Test(
      "a progressive JPEG's preview comes from its first DC scans, well before half the file, and looks like the image",
      arguments: [
        "photo/coil/normal.jpg", "photo/exif-samples/22-canon_tags.jpg",
        "photo/jpeg-decoder/large_image.jpg", "photo/sharp/2569067123_aca715a2ee_o.jpg",
        "photo/squoosh/demo-large-photo.jpg",
      ])
    func progressive(photo: String) throws {
      let copy = try Transcoded.copy(of: Corpus.path(photo), as: .progressive, metadata: false)
      defer { try? FileManager.default.removeItem(atPath: copy) }
      let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: copy)))
      // Every chunk size finds the same point: the watch resumes where it stopped.
      let verdicts = [1, 7, 1000, 65536, bytes.count].map { Self.readySize(bytes, chunk: $0) }
      guard case .ready(let size) = verdicts[0] else {
        Issue.record("\(photo): \(verdicts[0])")
        return
      }
      #expect(verdicts.allSatisfy { $0 == verdicts[0] })
      #expect(size < bytes.count / 2, "\(photo): \(size) of \(bytes.count)")
      let preview = try #require(
        try Thumbnailer().preview(.bytes(Array(bytes[..<size])), spec: ValidSpec(Self.spec)))
      #expect(preview.decodedFromDCScans)
      let full = try Thumbnailer().thumbnail(.bytes(bytes), spec: ValidSpec(Self.spec))
      #expect(preview.sourceWidth == full.sourceWidth && preview.sourceHeight == full.sourceHeight)
      #expect(preview.width <= full.width && preview.height <= full.height)
      let psnr = try Self.likeness(preview, of: bytes)
      #expect(psnr >= 30, "\(photo): \(psnr) dB")
      // One byte fewer is not enough: the point is the first where the DC scans are all in.
      #expect(throws: ThumbnailError.self) {
        _ = try Thumbnailer().preview(
          .bytes(Array(bytes[..<(size - 3)])), spec: ValidSpec(Self.spec))
      }
    }

    @Test(
      "a JPEG's EXIF thumbnail of the image's shape is its preview, upright, ready once the first scan header is in",
      arguments: [
        "photo/exif-samples/canon_hdr_NO.jpg", "photo/squoosh/demo-large-photo.jpg",
        "photo/zune-image/medium_no_samp_2500x1786.jpg", "photo/glide/issue387_rotated_jpeg.jpg",
        "icc/metadata-extractor/Canon_EOS_7D.jpg",
      ])
    func exifThumbnail(photo: String) throws {
      let bytes = try Corpus.bytes(photo)
      let full = try Thumbnailer().thumbnail(.bytes(bytes), spec: ValidSpec(Self.spec))
      switch Self.readySize(bytes, chunk: 4096) {
      case .ready(let size):
        #expect(size < 96 * 1024, "\(photo): \(size)")
        let preview = try #require(
          try Thumbnailer().preview(.bytes(Array(bytes[..<size])), spec: ValidSpec(Self.spec)))
        #expect(!preview.decodedFromDCScans)
        #expect(preview.orientation == full.orientation)
        // Upright as the image: portrait stays portrait.
        #expect((preview.width >= preview.height) == (full.width >= full.height))
        #expect(preview.width <= full.width && preview.height <= full.height)
        let psnr = try Self.likeness(preview, of: bytes)
        #expect(psnr >= 28, "\(photo): \(psnr) dB")
      case .none:
        // A thumbnail of another shape (letterboxed) is no preview; the whole file has none
        // either unless it is progressive.
        #expect(try Thumbnailer().preview(.bytes(bytes), spec: ValidSpec(Self.spec)) == nil)
      case .more:
        Issue.record("\(photo): the whole file left the watch undecided")
      }
    }

    /// `jpeg` with an EXIF block (little-endian TIFF) whose IFD1 points at `thumbnail`.
    static func withEXIFThumbnail(_ jpeg: [UInt8], thumbnail: [UInt8]) -> [UInt8] {
      func u16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
      func u32(_ v: Int) -> [UInt8] { u16(v & 0xFFFF) + u16(v >> 16) }
      func entry(_ tag: Int, _ type: Int, _ value: Int) -> [UInt8] {
        u16(tag) + u16(type) + u32(1) + (type == 3 ? u16(value) + [0, 0] : u32(value))
      }
      // IFD0 at 8 (Orientation 1), IFD1 at 26 (the JPEG thumbnail at 68).
      var tiff: [UInt8] = Array("II".utf8) + u16(42) + u32(8)
      tiff += u16(1) + entry(0x0112, 3, 1) + u32(26)
      tiff += u16(3) + entry(0x0103, 3, 6) + entry(0x0201, 4, 68)
      tiff += entry(0x0202, 4, thumbnail.count) + u32(0) + thumbnail
      let body = Array("Exif".utf8) + [0, 0] + tiff
      let length = body.count + 2
      return [0xFF, 0xD8, 0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + body
        + jpeg.dropFirst(2)
    }

    /// A baseline JPEG of one colour.
    static func solidJPEG(_ colour: (UInt8, UInt8, UInt8), _ width: Int, _ height: Int) throws
      -> [UInt8]
    {
      let pixels = [UInt8]((0..<(width * height)).flatMap { _ in [colour.0, colour.1, colour.2] })
      return try ImageEncoder.jpeg(
        Bitmap(pixels: pixels, width: width, height: height, channels: 3), quality: 90)
    }

    @Test(
      "an EXIF thumbnail is the preview only with the image's shape: a letterboxed 4:3 one of a 3:2 photo is not used"
    )
    func exifThumbnailShape() throws {
      // A blue 3:2 image with red thumbnails: a preview shows where it came from.
      let image = try Self.solidJPEG(Pictures.blue, 300, 200)
      let fitting = Self.withEXIFThumbnail(
        image, thumbnail: try Self.solidJPEG(Pictures.red, 150, 100))
      guard case .ready(let size) = Self.readySize(fitting, chunk: 256) else {
        Issue.record("no preview point for a thumbnail of the image's shape")
        return
      }
      let preview = try #require(
        try Thumbnailer().preview(.bytes(Array(fitting[..<size])), spec: ValidSpec(Self.spec)))
      #expect(Pictures.shows(preview.data, Pictures.red), "the preview is the thumbnail")
      #expect(preview.width == 150 && preview.height == 100 && preview.sourceWidth == 300)
      let letterboxed = Self.withEXIFThumbnail(
        image, thumbnail: try Self.solidJPEG(Pictures.red, 160, 120))
      #expect(Self.readySize(letterboxed, chunk: 256) == .none)
      #expect(try Thumbnailer().preview(.bytes(letterboxed), spec: ValidSpec(Self.spec)) == nil)
    }

    @Test(
      "an iPhone HEIC's preview is its embedded thumbnail, with the image's size and orientation")
    func heic() throws {
      let bytes = try Corpus.bytes("heif-valid/metadata-extractor/IMG_1034.heic")
      #expect(Self.readySize(bytes, chunk: 65536) == .none)
      let preview = try #require(
        try Thumbnailer().preview(.bytes(bytes), spec: ValidSpec(Self.spec)))
      let full = try Thumbnailer().thumbnail(.bytes(bytes), spec: ValidSpec(Self.spec))
      #expect(preview.sourceWidth == full.sourceWidth && preview.sourceHeight == full.sourceHeight)
      #expect((preview.width >= preview.height) == (full.width >= full.height))
      let psnr = try Self.likeness(preview, of: bytes)
      #expect(psnr >= 24, "\(psnr) dB")
    }

    @Test("formats and files without an early picture have no preview, and the watch says so")
    func none() throws {
      let baseline = try Transcoded.copy(
        of: Corpus.path("photo/coil/normal.jpg"), as: .baseline, metadata: false)
      defer { try? FileManager.default.removeItem(atPath: baseline) }
      let inputs: [[UInt8]] = [
        Array(try Data(contentsOf: URL(fileURLWithPath: baseline))),
        try Corpus.bytes("heif-valid/kimageformats/rgba.heic"),
        Pictures.solid((200, 40, 40), size: 64),
      ]
      for bytes in inputs {
        #expect(Self.readySize(bytes, chunk: 512) == .none)
        #expect(try Thumbnailer().preview(.bytes(bytes), spec: ValidSpec(Self.spec)) == nil)
      }
      // Bytes that are no image at all: undecided until enough to sniff, then none.
      var watch = PreviewPrefix()
      let junk = [UInt8](repeating: 0x41, count: 64)
      #expect(
        junk.withUnsafeBytes { watch.look(at: UnsafeRawBufferPointer(rebasing: $0[..<8])) } == .more
      )
      #expect(junk.withUnsafeBytes { watch.look(at: $0) } == .none)
    }

    @Test("the prefix watch never reads past the bytes it is given, whatever they hold")
    func hostilePrefixes() throws {
      // Every corpus JPEG, cut at every 997th byte: the watch and the preview decode either
      // answer or refuse (run under the address sanitizer in the fuzz job).
      var random = SeededRandom(seed: 33)
      for entry in Corpus.entries where entry.path.hasSuffix(".jpg") {
        let bytes = try Corpus.bytes(entry.path)
        var watch = PreviewPrefix()
        var end = 0
        while end < bytes.count {
          end = min(bytes.count, end + Int(random.next() % 997) + 1)
          let verdict = Array(bytes[..<end]).withUnsafeBytes { watch.look(at: $0) }
          if case .ready(let size) = verdict {
            #expect(size <= end)
            _ = try? Thumbnailer().preview(
              .bytes(Array(bytes[..<size])), spec: ValidSpec(Self.spec))
          }
          if verdict != .more { break }
        }
      }
    }
  }
}
