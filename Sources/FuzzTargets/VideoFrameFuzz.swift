import CSystem
import ImagePipeline
import Sandbox

#if canImport(Glibc)
  import Glibc
#endif

extension FuzzTarget {
  /// What the frame worker writes back, read as the attack it may be (a worker that FFmpeg's,
  /// poppler's or librsvg's parsers turned against thumbd), and the sniffing that routes a
  /// file to it.
  static let videoFrame = FuzzTarget(
    name: "video-frame",
    covers:
      "the frame worker's output (VideoFrames.read) and the sniffing of videos and drawings (FrameSource.sniff, with a compressed SVG's head inflated): a picture is accepted only with the header's size, inside the box asked for, exactly a 24-bit BMP's bytes (32-bit with the alpha flag), which thumbd's decoder then reads under its limits; an image format is never taken for a video or a drawing",
    maxLength: 1 << 20
  ) { bytes in
    if FrameSource.sniff(bytes) != nil {
      require(SourceFormat.sniff(bytes) == nil, "an image taken for a video or a drawing")
    }
    let file = ts_memory_file()
    guard file >= 0 else { return }
    defer { close(file) }
    let written = bytes.withUnsafeBytes { pwrite(file, $0.baseAddress, $0.count, 0) }
    guard written == bytes.count else { return }
    // The box comes from the input's last byte, so both bounded and free boxes are tried.
    let side = Int(bytes.last ?? 0)
    let box = (side, side / 2)
    let maxPixels = 1 << 20
    guard let frame = try? VideoFrames.read(file, box: box, maxPixels: maxPixels) else { return }
    let header = Array(bytes.prefix(Int(TF_HEADER_SIZE)))
    let field = { (offset: Int) in
      (0..<4).reduce(0) { $0 | Int(header[offset + $1]) << (8 * $1) }
    }
    let (width, height) = (field(8), field(12))
    require(width * height <= maxPixels, "a frame over the pixel limit was accepted")
    let alpha = field(24) & Int(TF_FLAG_ALPHA) != 0
    let length = alpha ? 122 + width * 4 * height : 54 + ((width * 3 + 3) & ~3) * height
    require(frame.image.count == length, "a frame of the wrong length")
    var limits = DecodingLimits()
    limits.maxPixels = maxPixels
    _ = try? Thumbnailer(limits: limits).thumbnail(
      .bytes(frame.image), spec: ValidSpec(ThumbnailSpec(width: 32, height: 32)))
  }
}
