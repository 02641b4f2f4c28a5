import Foundation
import Testing

@testable import ImagePipeline
@testable import TestSupport

extension DecodeSuites.Photos {
  /// Sequential JPEGs with restart markers, decoded in bands on several threads
  /// (jpeg_bands.c), against the same file decoded in one piece.
  @Suite("JPEG restart bands", .serialized)
  struct RestartBandsTests {
    /// Every JPEG of the corpus that must decode.
    static let jpegs = Corpus.entries(expected: "decode-ok").filter {
      $0.path.lowercased().hasSuffix(".jpg") || $0.path.lowercased().hasSuffix(".jpeg")
    }

    /// One piece, and three bands whatever other decodes run.
    static let onePiece: Thumbnailer = {
      var thumbnailer = Thumbnailer()
      thumbnailer.threadsPerDecode = 1
      return thumbnailer
    }()
    static let threeBands: Thumbnailer = {
      var thumbnailer = Thumbnailer()
      thumbnailer.threadsPerDecode = 3
      return thumbnailer
    }()

    /// The outcome of a thumbnail: the thumbnail, or the kind of error.
    enum Outcome: Equatable {
      case made(Thumbnail)
      case failed(String)

      var bands: Int {
        if case .made(let thumbnail) = self { return thumbnail.decodeBands }
        return 0
      }
    }

    static func outcome(_ make: () throws(ThumbnailError) -> Thumbnail) -> Outcome {
      do throws(ThumbnailError) { return .made(try make()) } catch { return .failed(error.kind) }
    }

    /// Both ways, from memory and from the file.
    static func compare(_ path: String, _ spec: ThumbnailSpec, accept: Bool = false)
      throws -> (Outcome, Outcome)
    {
      var one = onePiece
      var three = threeBands
      one.limits.acceptDamaged = accept
      three.limits.acceptDamaged = accept
      let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
      let expected = outcome { () throws(ThumbnailError) in
        try one.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
      }
      let banded = outcome { () throws(ThumbnailError) in
        try three.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
      }
      let fromFile = outcome { () throws(ThumbnailError) in
        try three.thumbnail(.path(path), spec: ValidSpec(spec))
      }
      #expect(expected.bands == 0, "one piece was asked for")
      #expect(banded == expected, "\(path) \(spec.pixelWidth): bands from memory")
      #expect(fromFile == expected, "\(path) \(spec.pixelWidth): bands from the file")
      #expect(banded.bands == fromFile.bands)
      return (expected, banded)
    }

    @Test(
      "every corpus JPEG with restart markers added losslessly (every row, every 3 rows, every 5 MCUs) thumbnails the same in bands as in one piece, byte for byte"
    )
    func corpusMatchesOnePiece() throws {
      var banded = 0
      var copies = 0
      for entry in Self.jpegs {
        for (rows, blocks) in [(1, nil), (3, nil), (nil, 5)] as [(Int?, Int?)] {
          guard
            let copy = try? Transcoded.copy(
              of: entry.url, as: .baseline, restartBlocks: blocks, restartRows: rows)
          else { continue }
          defer { try? FileManager.default.removeItem(atPath: copy) }
          copies += 1
          // 1/8 for most of them (64 px), and 1/4 or 1/2 for the larger ones (400 px).
          for size in [64, 400] {
            let (_, result) = try Self.compare(copy, ThumbnailSpec(width: size, height: size))
            if result.bands > 1 { banded += 1 }
          }
        }
      }
      // Most copies are tall enough for bands (16 rows of MCUs or more) at some size; were
      // the bands never used, this suite would prove nothing.
      #expect(copies >= 3 * Self.jpegs.count / 2, "jpegtran failed on many files")
      #expect(banded >= copies / 2, "bands used \(banded) times in \(copies) copies")
    }

    /// A large photo with a restart marker every row, in the temporary folder.
    static func restartPhoto() throws -> String {
      try Transcoded.copy(of: Corpus.path("photo/coil/large.jpg"), as: .baseline, restartRows: 1)
    }

    @Test("a large photo is decoded in as many bands as asked for")
    func bandsAsAskedFor() throws {
      let copy = try Self.restartPhoto()
      defer { try? FileManager.default.removeItem(atPath: copy) }
      for threads in [2, 3, 5] {
        var thumbnailer = Thumbnailer()
        thumbnailer.threadsPerDecode = threads
        let thumbnail = try thumbnailer.thumbnail(
          .path(copy), spec: ValidSpec(ThumbnailSpec(width: 128, height: 128)))
        #expect(thumbnail.decodeBands == threads)
      }
      // Without restart markers there is nothing to split at.
      var thumbnailer = Thumbnailer()
      thumbnailer.threadsPerDecode = 4
      let plain = try thumbnailer.thumbnail(
        .path(Corpus.path("photo/coil/large.jpg")),
        spec: ValidSpec(ThumbnailSpec(width: 128, height: 128)))
      #expect(plain.decodeBands == 0)
    }

    @Test("bands are cut to equal work, not equal height: a picture flat above, detailed below")
    func bandsOfEqualWork() throws {
      let source = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-halves-\(UUID().uuidString.prefix(8)).jpg").path
      try LargeJPEG.flatAboveNoise(source, size: 1024)
      defer { try? FileManager.default.removeItem(atPath: source) }
      let copy = try Transcoded.copy(of: source, as: .baseline, restartRows: 1)
      defer { try? FileManager.default.removeItem(atPath: copy) }
      for threads in [2, 3] {
        var thumbnailer = Thumbnailer()
        thumbnailer.threadsPerDecode = threads
        let thumbnail = try thumbnailer.thumbnail(
          .path(copy), spec: ValidSpec(ThumbnailSpec(width: 128, height: 128)))
        #expect(thumbnail.decodeBands == threads)
        // Cut at the middle row, the lower band would hold nearly all the work; cut by work,
        // each band holds its share to within a row of MCUs (64 rows here).
        let fair = 1 / Double(threads)
        #expect(
          thumbnail.decodeBandShare > fair - 0.01 && thumbnail.decodeBandShare < fair + 0.05,
          "largest band's share \(thumbnail.decodeBandShare) with \(threads) bands")
      }
      // And the pixels are the one-piece decode's.
      _ = try Self.compare(copy, ThumbnailSpec(width: 128, height: 128))
    }

    /// Damage the bands meet: the one-piece decode decides what it means, strict or accepting.
    @Test("damage inside a band, a restart marker out of order and a cut file end as in one piece")
    func damageAsInOnePiece() throws {
      let copy = try Self.restartPhoto()
      defer { try? FileManager.default.removeItem(atPath: copy) }
      let original = try [UInt8](Data(contentsOf: URL(fileURLWithPath: copy)))
      var variants: [(String, [UInt8])] = []
      // Bytes of entropy-coded data overwritten two thirds in.
      var overwritten = original
      let middle = original.count * 2 / 3
      for i in middle..<(middle + 64) where overwritten[i] != 0xFF && overwritten[i - 1] != 0xFF {
        overwritten[i] = 0x5A
      }
      variants.append(("overwritten", overwritten))
      // The restart marker after the first half renumbered.
      var renumbered = original
      if let marker = (original.count / 2..<original.count - 1).first(where: {
        original[$0] == 0xFF && (0xD0...0xD7).contains(original[$0 + 1])
      }) {
        renumbered[marker + 1] = 0xD0 + (original[marker + 1] - 0xD0 + 3) % 8
        variants.append(("renumbered", renumbered))
      }
      // A marker that is not a restart in the middle of the entropy-coded data.
      var foreign = original
      if let marker = (original.count / 3..<original.count - 1).first(where: {
        original[$0] == 0xFF && (0xD0...0xD7).contains(original[$0 + 1])
      }) {
        foreign[marker + 1] = 0xFE
        variants.append(("foreign marker", foreign))
      }
      // Cut at 70%.
      variants.append(("cut", Array(original.prefix(original.count * 7 / 10))))
      #expect(variants.count == 4)
      for (name, bytes) in variants {
        let path = copy + "-" + name.replacingOccurrences(of: " ", with: "-")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        for accept in [false, true] {
          let (expected, banded) = try Self.compare(
            path, ThumbnailSpec(width: 96, height: 96), accept: accept)
          #expect(banded.bands == 0, "\(name): a damaged file is decoded in one piece")
          if !accept, case .made = expected {
            Issue.record("\(name): damage went unnoticed")
          }
        }
      }
    }

    @Test("a cancelled decode in bands stops with a cancellation")
    func cancelled() throws {
      let copy = try Self.restartPhoto()
      defer { try? FileManager.default.removeItem(atPath: copy) }
      let flag = CancellationFlag()
      flag.cancel()
      do throws(ThumbnailError) {
        _ = try Self.threeBands.thumbnail(
          .path(copy), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)), cancellation: flag)
        Issue.record("a cancelled decode made a thumbnail")
      } catch {
        #expect(error.kind == "cancelled")
      }
    }
  }
}
