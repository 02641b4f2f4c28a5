import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

/// Adam7 PNGs reduced pass by pass into block sums (png_decode.c): no full-size image for a
/// small output. Measured from outside, in a process of their own (GNU time): the 10000x10000
/// grey one took 286 MiB above the baseline, the 16-bit RGBA one 382 MiB and 2.8 s of CPU.
@Suite("Interlaced PNG", .serialized)
struct InterlacedPNGTests {
  @Test(
    "a 10000x10000 grey and a 6000x6000 16-bit RGBA Adam7 PNG thumbnail within 64 MiB above the baseline and 5 s of CPU",
    arguments: [(10000, "grey"), (6000, "rgba16")])
  func boundedMemory(size: Int, kind: String) async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let input = directory + "/adam7-\(kind).png"
    try await offPool { try InterlacedPNG.write(input, width: size, height: size, kind: kind) }
    let (run, above) = try await ChildProcess.thumbnailMeasured(
      input, size: "256x256", output: directory + "/out.png")
    #expect(run.status == 0, "\(run.standardError)")
    #expect(
      above < 64 * 1024, "\(above) KiB above the baseline")
    #expect(run.cpuSeconds < 5, "\(run.cpuSeconds) s of CPU")
  }

  /// The reduced path against an exact area average of the full decode, beside the same
  /// picture stored without interlace (rows streamed, the resampler's own block average).
  @Test(
    "an Adam7 thumbnail matches the full decode's area average as closely as the same image stored progressively"
  )
  func matchesAreaAverage() throws {
    let thumbnailer = Thumbnailer()
    let photo = try thumbnailer.decodeFullResolution(
      .path(Corpus.path("photo/coil/normal.jpg")))
    var rgba: [UInt8] = []
    rgba.reserveCapacity(photo.width * photo.height * 4)
    for index in 0..<(photo.width * photo.height) {
      let p = index * photo.channels
      rgba += [
        photo.pixels[p], photo.pixels[p + 1], photo.pixels[p + 2],
        UInt8(truncatingIfNeeded: 128 + index % 128),
      ]
    }
    for channels in [3, 4] {
      let pixels = channels == 4 ? rgba : photo.pixels
      let bitmap = Bitmap(
        pixels: pixels, width: photo.width, height: photo.height, channels: channels)
      let interlaced = try ImageEncoder.png(bitmap, interlaced: true)
      let plain = try ImageEncoder.png(bitmap)
      for box in [64, 160, 300] {
        let spec = ThumbnailSpec(width: box, height: box, format: .png)
        let a = try thumbnailer.decodeFullResolution(
          .bytes(thumbnailer.thumbnail(.bytes(interlaced), spec: ValidSpec(spec)).data))
        let b = try thumbnailer.decodeFullResolution(
          .bytes(thumbnailer.thumbnail(.bytes(plain), spec: ValidSpec(spec)).data))
        let reference = ImageMetrics.areaAverage(bitmap, width: a.width, height: a.height)
        let flat = { (image: Bitmap) in channels == 4 ? ImageMetrics.flattened(image) : image }
        let adam7 = ImageMetrics.psnr(flat(reference), flat(a))
        let streamed = ImageMetrics.psnr(flat(reference), flat(b))
        #expect(adam7 >= 40, "\(channels) channels at \(box): \(adam7) dB")
        #expect(
          adam7 >= streamed - 2, "\(channels) channels at \(box): \(adam7) dB, streamed \(streamed)"
        )
      }
    }
  }
}
