import Foundation
import Testing

@testable import ImagePipeline
@testable import TestSupport

extension DecodeSuites.Photos {
  /// Progressive JPEGs at 1/8 from their DC scans alone (jpeg_dc_scans.c), against libjpeg's
  /// whole-image decode of the same file at the same scale.
  @Suite("Progressive JPEGs from their DC scans", .serialized)
  struct ProgressiveDCTests {
    static let photos = [
      "photo/coil/normal.jpg",  // 4:2:0
      "photo/exif-samples/22-canon_tags.jpg",  // 4:2:2
      "photo/jpeg-decoder/large_image.jpg",  // 4:4:4
      "photo/exif-samples/canon_hdr_NO.jpg",  // 4:2:2, EXIF orientation 6
      "photo/sharp/2569067123_aca715a2ee_o.jpg",  // 4:2:0
    ]

    /// Both paths at 1/8: the DC path, and libjpeg's.
    static func bothPaths(_ path: String) throws -> (dc: Bitmap, libjpeg: Bitmap) {
      var libjpeg = Thumbnailer()
      libjpeg.progressiveDC = false
      return (
        try Thumbnailer().decodeScaled(contentsOf: path, atLeast: 1, 1),
        try libjpeg.decodeScaled(contentsOf: path, atLeast: 1, 1)
      )
    }

    @Test(
      "a progressive copy decodes at 1/8 within 45 dB of libjpeg's whole-image decode",
      arguments: photos)
    func matchesLibjpeg(photo: String) throws {
      for restart in [nil, 3] as [Int?] {
        let copy = try Transcoded.copy(
          of: Corpus.path(photo), as: .progressive, restartBlocks: restart)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        let (dc, libjpeg) = try Self.bothPaths(copy)
        #expect(dc.width == libjpeg.width && dc.height == libjpeg.height)
        let psnr = ImageMetrics.psnr(dc, libjpeg)
        #expect(psnr >= 45, "\(photo) restart \(restart ?? 0): \(psnr) dB")
      }
    }

    @Test(
      "CMYK and YCCK progressive copies take the DC path at 1/8 and match libjpeg's decode",
      arguments: [
        "jpeg-valid/jpeg-decoder/jpg-cmyk-2.jpg", "jpeg-valid/jpeg-decoder/ycck.jpg",
        "jpeg-valid/sharp/Channel_digital_image_CMYK_color_no_profile.jpg",
        "jpeg-valid/thumbor/cmyk-icc.jpg", "jpeg-valid/zune-image/four_components.jpg",
      ])
    func fourComponents(path: String) throws {
      let copy = try Transcoded.copy(of: Corpus.path(path), as: .progressive)
      defer { try? FileManager.default.removeItem(atPath: copy) }
      let (dc, libjpeg) = try Self.bothPaths(copy)
      #expect(dc.width == libjpeg.width && dc.height == libjpeg.height)
      let psnr = ImageMetrics.psnr(dc, libjpeg)
      #expect(psnr >= 40, "\(path): \(psnr) dB")
      let small = try Thumbnailer().thumbnail(
        .path(copy), spec: ValidSpec(ThumbnailSpec(width: 16, height: 16)))
      #expect(small.decodedFromDCScans, "\(path) did not take the DC path")
    }

    @Test("luma alone is exact: a grey progressive copy equals libjpeg's 1/8 decode")
    func greyIsExact() throws {
      let grey = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-grey-\(UUID().uuidString.prefix(8)).jpg").path
      defer { try? FileManager.default.removeItem(atPath: grey) }
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/jpegtran")
      process.arguments = [
        "-grayscale", "-progressive", "-outfile", grey, Corpus.path(Self.photos[0]),
      ]
      try process.run()
      process.waitUntilExit()
      let (dc, libjpeg) = try Self.bothPaths(grey)
      #expect(dc == libjpeg)
    }

    @Test("a thumbnail of a progressive file takes the DC path only at 1/8")
    func onlyAtOneEighth() throws {
      let copy = try Transcoded.copy(
        of: Corpus.path("photo/sharp/2569067123_aca715a2ee_o.jpg"), as: .progressive)
      defer { try? FileManager.default.removeItem(atPath: copy) }
      let small = try Thumbnailer().thumbnail(
        .path(copy), spec: ValidSpec(ThumbnailSpec(width: 128, height: 128)))
      #expect(small.decodedFromDCScans)
      let large = try Thumbnailer().thumbnail(
        .path(copy), spec: ValidSpec(ThumbnailSpec(width: 1024, height: 1024)))
      #expect(!large.decodedFromDCScans)
    }

    @Test("damage in the DC scans is caught; truncation too")
    func damage() throws {
      let copy = try Transcoded.copy(of: Corpus.path(Self.photos[0]), as: .progressive)
      defer { try? FileManager.default.removeItem(atPath: copy) }
      let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: copy)))
      let spec = ThumbnailSpec(width: 64, height: 64)
      // The first scan's data starts after the first SOS header: corrupt the middle of it.
      let sos = try #require(
        (0..<(bytes.count - 1)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA })
      let length = Int(bytes[sos + 2]) << 8 | Int(bytes[sos + 3])
      let dataStart = sos + 2 + length
      let next = try #require(
        (dataStart..<(bytes.count - 1)).first {
          bytes[$0] == 0xFF && bytes[$0 + 1] != 0 && !(0xD0...0xD7).contains(bytes[$0 + 1])
        })
      var damaged = bytes
      // A marker in the middle of the DC data: the scan ends early.
      damaged[(dataStart + next) / 2] = 0xFF
      damaged[(dataStart + next) / 2 + 1] = 0xD9
      #expect(throws: ThumbnailError.self) {
        _ = try Thumbnailer().thumbnail(.bytes(damaged), spec: ValidSpec(spec))
      }
      var lenient = Thumbnailer()
      lenient.limits.acceptDamaged = true
      #expect(try lenient.thumbnail(.bytes(damaged), spec: ValidSpec(spec)).damageWarnings > 0)
      // Cut in the middle of the first scan.
      #expect {
        _ = try Thumbnailer().thumbnail(
          .bytes(Array(bytes.prefix((dataStart + next) / 2))), spec: ValidSpec(spec))
      } throws: { ($0 as? ThumbnailError)?.kind == "truncated" }
    }

    @Test("the scan limits hold on the DC path: repeated and countless scans are too_complex")
    func scanLimits() throws {
      let spec = ThumbnailSpec(width: 3, height: 3)  // 1/8 for any source of 42 px or more
      let inputs = [
        HostileInputs.repeatedScan(try HostileInputs.fixture("flat_huff.jpg"), times: 5000),
        try HostileInputs.fixture("many_scans.jpg"),
      ]
      for bytes in inputs {
        #expect {
          _ = try Thumbnailer().thumbnail(.bytes(bytes), spec: ValidSpec(spec))
        } throws: { ($0 as? ThumbnailError)?.kind == "too_complex" }
      }
      // They are refused by the DC path itself: the file unrepeated goes through it.
      let once = try HostileInputs.fixture("flat_huff.jpg")
      #expect(try Thumbnailer().thumbnail(.bytes(once), spec: ValidSpec(spec)).decodedFromDCScans)
    }

    @Test(
      "every corpus progressive JPEG gets the same answer at 1/8 on both paths",
      arguments: Corpus.entries.filter { $0.note.contains("progressive,") })
    func corpusAgrees(entry: Corpus.Entry) throws {
      var libjpeg = Thumbnailer()
      libjpeg.progressiveDC = false
      let path = Corpus.path(entry.path)
      let dc = Result { () throws(ThumbnailError) in
        try Thumbnailer().decodeScaled(contentsOf: path, atLeast: 1, 1)
      }
      let reference = Result { () throws(ThumbnailError) in
        try libjpeg.decodeScaled(contentsOf: path, atLeast: 1, 1)
      }
      switch (dc, reference) {
      case (.success(let a), .success(let b)):
        #expect(a.width == b.width && a.height == b.height)
        // The wuffs scanNNN files stop after their first NNN scans: libjpeg estimates the
        // coefficients that never came from neighbouring blocks (block smoothing), this path
        // shows the ones the file has. A complete file must match.
        let complete = !entry.path.contains(".scan0")
        if entry.expected == "decode-ok" {
          #expect(ImageMetrics.psnr(a, b) >= (complete ? 45 : 25), "\(entry.path)")
        }
      case (.failure, .failure):
        break
      case (.success, .failure(let error)):
        // Only damage the DC scans never read (in AC scans) may pass here.
        #expect(entry.expected != "must-reject", "\(entry.path): libjpeg \(error)")
      case (.failure(let error), .success):
        #expect(entry.expected != "decode-ok", "\(entry.path): \(error)")
      }
    }
  }
}
