import Foundation
import Testing

@testable import ImagePipeline
@testable import TestSupport

/// Animated GIF and WebP to animated WebP or GIF (`ThumbnailSpec.maxFrames`), read back by
/// libwebp's own demuxer and by Pillow: frames, delays and loop count kept, the limits applied
/// before any frame.
@Suite("Animation")
struct AnimationTests {
  let gif = Corpus.path("gif-valid/danbooru/test-animated-3.35s.gif")

  func animated(_ path: String, frames: Int, _ change: (inout ThumbnailSpec) -> Void = { _ in })
    throws -> Thumbnail
  {
    var spec = ThumbnailSpec(width: 120, height: 120, format: .webp)
    spec.maxFrames = frames
    change(&spec)
    return try Thumbnailer().thumbnail(.path(path), spec: ValidSpec(spec))
  }

  @Test("a GIF's 47 frames, their delays (as browsers play them) and its loop count are kept")
  func gifToWebP() throws {
    let made = try animated(gif, frames: 100)
    #expect(made.frames == 47 && made.width == 120 && made.height == 89)
    let read = try #require(WebPAnimation.read(made.data))
    #expect(read.durations.count == 47 && read.loop == 0)
    #expect(read.width == 120 && read.height == 89)
    // 3.35 s, as its name says: 10 ms delays play as 100 ms.
    #expect(read.durations.reduce(0, +) == 3350, "\(read.durations)")
    #expect(Array(read.durations.prefix(3)) == [40, 40, 100])
  }

  @Test("frames are cut at the limit; one frame, or another output format, is a still")
  func limitsAndStills() throws {
    let ten = try animated(gif, frames: 10)
    #expect(ten.frames == 10 && WebPAnimation.read(ten.data)?.durations.count == 10)
    let still = try animated(gif, frames: 1)
    #expect(still.frames == 1 && WebPAnimation.read(still.data)?.durations.count == 1)
    let png = try animated(gif, frames: 100) { $0.format = .png }
    #expect(png.frames == 1 && png.format == .png)
    let stillWebP = try animated(
      Corpus.path("webp-valid/image-rs/simple_xmp.webp"), frames: 100)
    #expect(stillWebP.frames == 1 && WebPAnimation.read(stillWebP.data)?.durations.count == 1)
    // Every other source is read from its start again after the look at its first bytes.
    let jpeg = try animated(Corpus.path("photo/coil/normal.jpg"), frames: 100)
    #expect(jpeg.frames == 1 && jpeg.format == .webp && jpeg.height == 120)
  }

  @Test("an animated WebP stays animated, and geometry applies to every frame")
  func webpToWebP() throws {
    let first = try animated(gif, frames: 100)
    let path = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-animated-\(UUID().uuidString).webp").path
    try Data(first.data).write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let again = try animated(path, frames: 100) {
      $0.width = 60
      $0.geometry.rotation = 90
      $0.geometry.padding = Padding(top: 2)
    }
    let read = try #require(WebPAnimation.read(again.data))
    #expect(read.durations.count == 47 && read.durations.reduce(0, +) == 3350)
    // 120x89 turned is 89x120, contained in 60x120 is 60x81, padded by 2 on top.
    #expect(read.width == 60 && read.height == 83, "turned, then padded")
    #expect(again.width == 60 && again.height == 83)
  }

  @Test("frames times pixels over the limit are refused before any frame is decoded")
  func refusedBeforeDecoding() throws {
    // A GIF header declaring three 8000x8000 frames, with no image data at all: a decode
    // would fail as truncated, so the refusal must come first.
    var bytes = Array("GIF89a".utf8) + [0x40, 0x1F, 0x40, 0x1F, 0, 0, 0]
    for _ in 0..<3 {
      bytes += [0x2C, 0, 0, 0, 0, 0x40, 0x1F, 0x40, 0x1F, 0, 2, 0]
    }
    bytes += [0x3B]
    var spec = ThumbnailSpec(width: 64, height: 64, format: .webp)
    spec.maxFrames = 3
    #expect {
      try Thumbnailer().thumbnail(.bytes(bytes), spec: ValidSpec(spec))
    } throws: { error in
      guard case .tooComplex(let message)? = error as? ThumbnailError else { return false }
      return message.contains("pixel limit")
    }
  }

  @Test("an animation's memory estimate counts its canvases")
  func estimate() throws {
    var spec = ThumbnailSpec(width: 120, height: 120, format: .webp)
    let still = try Thumbnailer().estimate(.path(gif), spec: ValidSpec(spec))
    spec.maxFrames = 100
    let animated = try Thumbnailer().estimate(.path(gif), spec: ValidSpec(spec))
    #expect(animated.bytes >= still.bytes + 241 * 178 * 4 * 2)
  }

  @Test("a frame larger than the limits, on a small screen, is refused before its rows")
  func oversizedFrame() throws {
    // A 4x4 screen and a first frame of 4x4 (as Pillow writes one), then a frame that declares
    // 60000x60000 with no data: its rows must never be asked for.
    var bytes = Array("GIF89a".utf8) + [4, 0, 4, 0, 0x80, 0, 0] + [0, 0, 0, 0, 0, 0]
    bytes += [0x2C, 0, 0, 0, 0, 4, 0, 4, 0, 0, 8, 9, 0, 1, 8, 28, 72, 176, 32, 128, 128, 0]
    bytes += [0x2C, 0, 0, 0, 0, 0x60, 0xEA, 0x60, 0xEA, 0, 8, 0, 0x3B]
    var spec = ThumbnailSpec(width: 4, height: 4, format: .webp)
    spec.maxFrames = 2
    #expect {
      try Thumbnailer().thumbnail(.bytes(bytes), spec: ValidSpec(spec))
    } throws: { error in
      guard case .tooLarge? = error as? ThumbnailError else { return false }
      return true
    }
  }

  @Test("a damaged later frame keeps the frames before it, as browsers play them")
  func damagedTail() throws {
    var bytes = Array("GIF89a".utf8) + [4, 0, 4, 0, 0x80, 0, 0] + [0, 0, 0, 0, 0, 0]
    bytes += [0x2C, 0, 0, 0, 0, 4, 0, 4, 0, 0, 8, 9, 0, 1, 8, 28, 72, 176, 32, 128, 128, 0]
    bytes += [0x2C, 0, 0, 0, 0, 4, 0, 4, 0, 0, 8, 0, 0x3B]
    var spec = ThumbnailSpec(width: 4, height: 4, format: .webp)
    spec.maxFrames = 2
    let made = try Thumbnailer().thumbnail(.bytes(bytes), spec: ValidSpec(spec))
    #expect(made.frames == 1 && WebPAnimation.read(made.data)?.durations.count == 1)
  }

  @Test("GIF out: the frames, their delays and the loop count kept, each frame close to a still")
  func gifToGIF() throws {
    let made = try animated(gif, frames: 100) { $0.format = .gif }
    #expect(made.format == .gif && made.frames == 47 && made.width == 120 && made.height == 89)
    let read = try #require(PillowImage.read(made.data))
    #expect(read.width == 120 && read.height == 89 && read.loop == 0)
    #expect(read.durations.count == 47 && read.durations.reduce(0, +) == 3350)
    #expect(Array(read.durations.prefix(3)) == [40, 40, 100])
    // The first frame against the same picture as a lossless still (PNG): one palette of
    // 255 colours, dithered, keeps it within 30 dB.
    let still = try animated(gif, frames: 1) { $0.format = .png }
    let reference = try Thumbnailer().decodeFullResolution(.bytes(still.data))
    let first = Bitmap(pixels: read.frames[0], width: 120, height: 89, channels: 4)
    let psnr = ImageMetrics.psnr(
      ImageMetrics.flattened(first), ImageMetrics.flattened(reference))
    #expect(psnr >= 30, "\(psnr) dB")
    // A source that plays once is written without a loop block; one that plays three times
    // repeats twice.
    for (plays, repeats) in [(1, nil), (3, 2)] as [(Int, Int?)] {
      let source = try Self.twoFrameGIF(plays: plays)
      var spec = ThumbnailSpec(width: 4, height: 4, format: .gif)
      spec.maxFrames = 2
      let again = try #require(
        PillowImage.read(try Thumbnailer().thumbnail(.bytes(source), spec: ValidSpec(spec)).data))
      #expect(again.durations.count == 2 && again.loop == repeats, "plays \(plays)")
    }
  }

  @Test(
    "GIF out keeps transparency where alpha is under 128, and a pixel that turns clear shows clear")
  func gifTransparency() throws {
    // Frame 1: opaque red, cleared after it is shown. Frame 2: its left half transparent, its
    // right half blue: clear on the left, as a browser shows it.
    var spec = ThumbnailSpec(width: 4, height: 4, format: .gif)
    spec.maxFrames = 2
    let made = try Thumbnailer().thumbnail(
      .bytes(try Self.twoFrameGIF(plays: 0)), spec: ValidSpec(spec))
    let read = try #require(PillowImage.read(made.data))
    #expect(read.frames.count == 2)
    for (index, frame) in read.frames.enumerated() {
      let alpha = stride(from: 3, to: frame.count, by: 4).map { frame[$0] }
      if index == 0 {
        #expect(alpha.allSatisfy { $0 == 255 }, "frame 1 is opaque")
        #expect(frame[0] > 200 && frame[1] < 40, "frame 1 is red")
      } else {
        for x in 0..<4 {
          let pixel = Array(frame[(x * 4)..<(x * 4 + 4)])
          #expect(x < 2 ? pixel[3] == 0 : pixel == [0, 0, 255, 255], "frame 2, x \(x): \(pixel)")
        }
      }
    }
    // A still with alpha: clear pixels are the transparent index.
    let pixels = (0..<16).flatMap { i -> [UInt8] in i % 2 == 0 ? [0, 0, 255, 255] : [0, 0, 0, 0] }
    let png = try ImageEncoder.png(Bitmap(pixels: pixels, width: 4, height: 4, channels: 4))
    let still = try Thumbnailer().thumbnail(
      .bytes(png), spec: ValidSpec(ThumbnailSpec(width: 4, height: 4, format: .gif)))
    let frame = try #require(PillowImage.read(still.data)?.frames.first)
    #expect(frame.count == 64)
    for i in 0..<16 {
      #expect(frame[i * 4 + 3] == (i % 2 == 0 ? 255 : 0), "pixel \(i)")
    }
  }

  /// A 4x4 GIF of two frames, 100 ms each, by Pillow: opaque red, then its left half
  /// transparent and its right half blue (disposal 2: the canvas is cleared after each, so
  /// that half shows clear; every pixel changes, so Pillow writes the whole frame); played
  /// `plays` times (0: for ever).
  static func twoFrameGIF(plays: Int) throws -> [UInt8] {
    let path = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-two-\(UUID().uuidString).gif").path
    defer { try? FileManager.default.removeItem(atPath: path) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = [
      "-c",
      """
      import sys
      from PIL import Image
      red = Image.new("RGBA", (4, 4), (255, 0, 0, 255))
      half = Image.new("RGBA", (4, 4), (0, 0, 255, 255))
      half.paste((0, 0, 0, 0), (0, 0, 2, 4))
      plays = int(sys.argv[2])
      extra = {} if plays == 1 else {"loop": 0 if plays == 0 else plays - 1}
      red.save(sys.argv[1], save_all=True, append_images=[half], duration=100, disposal=2,
               **extra)
      """,
      path, String(plays),
    ]
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw POSIXError(.EIO) }
    return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
  }
}
