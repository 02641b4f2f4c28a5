import CImageCodecs

/// A picture laid over thumbnails (imgproxy's `wm`), decoded once from a file the
/// configuration names and kept premultiplied in memory. Requests name it, never its path or
/// a URL. Two watermarks are equal when their names and pixels are: a replaced file (read at
/// the next start) makes new cache keys.
public final class Watermark: Sendable, Hashable {
  /// The largest side a watermark file may have.
  public static let maxSide = 4_096

  /// The name requests use.
  public let name: String
  /// Premultiplied RGBA, `width` x `height`.
  let pixels: [UInt8]
  /// Its size.
  public let width: Int
  /// Its size.
  public let height: Int
  /// A digest of its pixels, for cache keys.
  public let digest: UInt64

  /// Decodes the image at `path` (any format thumbd reads, at most `maxSide` a side).
  public init(name: String, contentsOf path: String) throws(ThumbnailError) {
    var thumbnailer = Thumbnailer()
    thumbnailer.limits.maxWidth = Self.maxSide
    thumbnailer.limits.maxHeight = Self.maxSide
    thumbnailer.limits.maxPixels = Self.maxSide * Self.maxSide
    let bitmap = try thumbnailer.decodeFullResolution(.path(path))
    var pixels = [UInt8](repeating: 0, count: bitmap.width * bitmap.height * 4)
    for i in 0..<bitmap.width * bitmap.height {
      let alpha = bitmap.channels == 4 ? Int(bitmap.pixels[i * 4 + 3]) : 255
      for c in 0..<3 {
        pixels[i * 4 + c] = UInt8((Int(bitmap.pixels[i * bitmap.channels + c]) * alpha + 127) / 255)
      }
      pixels[i * 4 + 3] = UInt8(alpha)
    }
    self.name = name
    self.pixels = pixels
    (width, height) = (bitmap.width, bitmap.height)
    digest = ContentDigest.of(pixels)
  }

  /// Equal names and pixels.
  public static func == (a: Watermark, b: Watermark) -> Bool {
    a.name == b.name && a.digest == b.digest && a.width == b.width
  }

  /// Hashes the name and digest.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(name)
    hasher.combine(digest)
  }
}

/// Where and how a watermark is laid over a thumbnail: `wm:OPACITY:POSITION:X:Y:SCALE`.
public struct WatermarkPlacement: Sendable, Hashable {
  /// The picture.
  public var image: Watermark
  /// How much of it shows, 0...1.
  public var opacity: Double
  /// Where it sits, offsets in output points; with `replicate`, the gaps between tiles.
  public var position: Gravity
  /// Tiled over the whole result (imgproxy's `re`).
  public var replicate: Bool
  /// Its width as a fraction of the result's, 0...1 (0: its own size).
  public var scale: Double

  /// A placement.
  public init(
    image: Watermark, opacity: Double = 1, position: Gravity = .centre, replicate: Bool = false,
    scale: Double = 0
  ) {
    (self.image, self.opacity, self.position) = (image, opacity, position)
    (self.replicate, self.scale) = (replicate, scale)
  }

  /// The canonical text, for cache keys.
  var key: String {
    "wm=\(image.name)@\(String(image.digest, radix: 16)):\(opacity):"
      + (replicate ? "re:\(position.offsetX):\(position.offsetY)" : position.key) + ":\(scale)"
  }

  func validate() throws(ThumbnailError) {
    guard (0...1).contains(opacity), (0...1).contains(scale) else {
      throw .invalidSpec("a watermark's opacity and scale must be 0 to 1")
    }
    try position.check("watermark", smart: false)
    guard !replicate || (position.offsetX >= 0 && position.offsetY >= 0) else {
      throw .invalidSpec("a replicated watermark's gaps must be 0 or more")
    }
  }

  /// The codecs' form, pointing into `pixels` (the image's, alive for the call).
  func cValue(scale deviceScale: Double, pixels: UnsafePointer<UInt8>) -> ic_watermark {
    ic_watermark(
      pixels: pixels, width: UInt32(image.width), height: UInt32(image.height),
      opacity: opacity, position: position.cValue(scale: deviceScale),
      replicate: replicate ? 1 : 0, scale: scale)
  }
}
