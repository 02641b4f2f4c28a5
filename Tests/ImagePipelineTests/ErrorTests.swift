import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Bad input gets a clear, typed error.
@Suite("Errors")
struct ErrorTests {
  let spec = ThumbnailSpec(width: 128, height: 128)

  @Test("a truncated JPEG is `truncated` when strict and a padded image when damage is accepted")
  func truncatedJPEG() throws {
    let full = try Corpus.bytes("photo/coil/normal.jpg")
    let cut = Array(full.prefix(full.count / 2))
    #expect {
      _ = try Thumbnailer().thumbnail(.bytes(cut), spec: ValidSpec(spec))
    } throws: { ($0 as? ThumbnailError)?.kind == "truncated" }
    let padded = try Thumbnailer(limits: DecodingLimits(acceptDamaged: true)).thumbnail(
      .bytes(cut), spec: ValidSpec(spec))
    #expect(padded.width == 102 && padded.height == 128)
    #expect(padded.damageWarnings > 0, "accepted damage is reported")
    #expect(try Thumbnailer().thumbnail(.bytes(full), spec: ValidSpec(spec)).damageWarnings == 0)
  }

  @Test("a truncated PNG is `truncated`")
  func truncatedPNG() throws {
    let full = try Corpus.bytes("photo/image-png/kodim02.png")
    #expect {
      _ = try Thumbnailer().thumbnail(
        .bytes(Array(full.prefix(full.count / 3))), spec: ValidSpec(spec))
    } throws: { ($0 as? ThumbnailError)?.kind == "truncated" }
  }

  @Test("a flipped bit in PNG data fails its CRC")
  func pngCRC() throws {
    var bytes = try Corpus.bytes("photo/image-png/kodim02.png")
    bytes[bytes.count / 2] ^= 0x10
    #expect {
      _ = try Thumbnailer().thumbnail(.bytes(bytes), spec: ValidSpec(spec))
    } throws: { ($0 as? ThumbnailError)?.kind == "corrupt" }
  }

  @Test("empty input and garbage are unsupported")
  func unsupported() {
    for bytes in [[], [UInt8](repeating: 7, count: 100), Array("BM6....".utf8)] {
      #expect {
        _ = try Thumbnailer().thumbnail(.bytes(bytes), spec: ValidSpec(spec))
      } throws: { ($0 as? ThumbnailError)?.kind == "unsupported_format" }
    }
  }

  @Test("pixel limits give tooLarge with the header's size and a message naming the limit")
  func pixelLimit() {
    let limits = DecodingLimits(maxPixels: 1_000_000)
    #expect(
      throws: ThumbnailError.tooLarge(
        width: 4000, height: 6000,
        message: "4000x6000 is 24000000 pixels, over the limit of 1000000 pixels")
    ) {
      _ = try Thumbnailer(limits: limits).thumbnail(
        .path(Corpus.path("photo/coil/large.jpg")), spec: ValidSpec(spec))
    }
    #expect(
      throws: ThumbnailError.tooLarge(
        width: 6000, height: 3300,
        message: "6000x3300 is wider than the limit of 5000 pixels a side")
    ) {
      _ = try Thumbnailer(limits: DecodingLimits(maxWidth: 5000)).thumbnail(
        .path(Corpus.path("png-valid/large/large.png")), spec: ValidSpec(spec))
    }
  }

  @Test("a missing file is an io error")
  func missingFile() {
    #expect {
      _ = try Thumbnailer().thumbnail(.path("/nonexistent/x.jpg"), spec: ValidSpec(spec))
    } throws: { ($0 as? ThumbnailError)?.kind == "io" }
  }

  @Test(
    "a raised cancellation flag stops JPEG and PNG decodes with `cancelled`",
    arguments: [
      "photo/coil/large.jpg", "photo/squoosh/demo-large-photo.jpg", "png-valid/large/large.png",
      "png-valid/pngsuite/basi6a08.png",
    ])
  func cancellation(path: String) {
    let flag = CancellationFlag()
    flag.cancel()
    #expect(flag.isCancelled)
    #expect(throws: ThumbnailError.cancelled) {
      _ = try Thumbnailer().thumbnail(
        .path(Corpus.path(path)), spec: ValidSpec(spec), cancellation: flag)
    }
  }

  /// The source arrives through a FIFO: the decoder cannot finish before the test has written
  /// every byte, so raising the flag after the first 30% must stop it part-way, deterministically.
  @Test(
    "cancelling mid-decode stops at the next check",
    arguments: [
      "png-valid/large/large.png", "photo/coil/large.jpg", "photo/squoosh/demo-large-photo.jpg",
    ])
  func cancelPartWay(path: String) async throws {
    let bytes = try Corpus.bytes(path)
    let fifo = FIFOFeeder.make()
    defer { unlink(fifo) }
    let flag = CancellationFlag()
    // The decode blocks on the FIFO, so it runs on a thread of its own, never on the
    // cooperative pool (parallel test cases would exhaust it and deadlock).
    let outcome = await withCheckedContinuation { continuation in
      Thread.detachNewThread {
        continuation.resume(
          returning: Result { () throws(ThumbnailError) in
            try Thumbnailer().thumbnail(
              .path(fifo), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)), cancellation: flag
            )
          })
      }
      FIFOFeeder.feed(bytes, to: fifo, split: bytes.count * 3 / 10) { flag.cancel() }
    }
    #expect(throws: ThumbnailError.cancelled) { try outcome.get() }
  }
}
