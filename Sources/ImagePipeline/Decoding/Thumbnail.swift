/// An encoded thumbnail and what is known about how it was made.
public struct Thumbnail: Sendable, Hashable {
  /// The encoded bytes.
  public let data: [UInt8]
  /// A 64-bit digest of `data`, stable across processes and versions: HTTP entity tags and
  /// change detection use it without hashing the bytes again.
  public let digest: UInt64
  /// The encoding of `data`.
  public var format: ImageFormat
  /// Pixel width, upright.
  public var width: Int
  /// Pixel height, upright.
  public var height: Int
  /// Whether any output pixel is not fully opaque.
  public var hasAlpha: Bool
  /// Stored (pre-orientation) source dimensions.
  public var sourceWidth: Int
  /// Stored (pre-orientation) source height.
  public var sourceHeight: Int
  /// The orientation that was applied, 1...8, in EXIF's numbering: the source's own (EXIF,
  /// or HEIF's rotation and mirroring), or 4 for a BMP stored bottom-up (its rows are the
  /// picture upside down, and are turned upright as an orientation is).
  public var orientation: Int
  /// Decoder warnings that mean damaged pixels. Non-zero only when damage was accepted
  /// (`DecodingLimits.acceptDamaged`): the thumbnail then shows libjpeg's grey padding.
  public var damageWarnings: Int
  /// The version of the source it was made from; a cache hit carries the current freshness.
  public var source: SourceVersion
  /// Whether a progressive JPEG was decoded from its DC scans alone (at 1/8); not stored in
  /// caches.
  public var decodedFromDCScans = false
  /// Bands a JPEG with restart markers was decoded in at once, each on a thread of its own
  /// (`Thumbnailer.threadsPerDecode`); 0 when it was decoded in one piece. Not stored in caches,
  /// and not compared: the pixels are the same either way.
  public var decodeBands = 0
  /// With bands: the largest band's share of the decode's estimated work (entropy-coded bytes
  /// and blocks), from 0 to 1; the bands are cut to about `1 / decodeBands` each. Not stored
  /// in caches, and not compared.
  public var decodeBandShare = 0.0
  /// What the colour step did with the source's profile; not stored in caches (`.none` on a
  /// hit).
  public var profile = ProfileOutcome.none
  /// Whether the profile's transform came from the cache rather than being parsed and linked
  /// for this decode; not stored in caches.
  public var profileTransformCached = false
  /// The placeholder made from this thumbnail's pixels, when the thumbnailer makes them; not
  /// stored with it in caches (the pipeline's `PlaceholderIndex` keeps it per source).
  public var placeholder: Placeholder?
  /// A video's length, when the source is a video and its length is known.
  public var duration: Duration?
  /// Frames in `data`: more than 1 for an animated WebP made from an animated source
  /// (`ThumbnailSpec.maxFrames`); not stored in caches.
  public var frames = 1

  /// Creates a thumbnail value.
  public init(
    data: [UInt8], format: ImageFormat, width: Int, height: Int, hasAlpha: Bool,
    sourceWidth: Int, sourceHeight: Int, orientation: Int, damageWarnings: Int = 0,
    source: SourceVersion = .unversioned()
  ) {
    self.data = data
    self.digest = ContentDigest.of(data)
    self.format = format
    self.width = width
    self.height = height
    self.hasAlpha = hasAlpha
    self.sourceWidth = sourceWidth
    self.sourceHeight = sourceHeight
    self.orientation = orientation
    self.damageWarnings = damageWarnings
    self.source = source
  }
}

/// A decoded, upright bitmap: 8-bit RGB or straight-alpha RGBA, row-major.
public struct Bitmap: Sendable, Hashable {
  /// Row-major samples, `channels` per pixel.
  public var pixels: [UInt8]
  /// Width in pixels.
  public var width: Int
  /// Height in pixels.
  public var height: Int
  /// 3 (RGB) or 4 (RGBA).
  public var channels: Int

  /// Creates a bitmap; `pixels.count` must be `width * height * channels`.
  public init(pixels: [UInt8], width: Int, height: Int, channels: Int) {
    precondition(pixels.count == width * height * channels, "bitmap size mismatch")
    self.pixels = pixels
    self.width = width
    self.height = height
    self.channels = channels
  }
}

extension Thumbnail {
  /// Equal when the output and what describes it are: how the colour step went this time
  /// (`profile`, `profileTransformCached`) is left out, as a cache hit does not know it.
  public static func == (a: Thumbnail, b: Thumbnail) -> Bool {
    a.data == b.data && a.format == b.format && a.width == b.width && a.height == b.height
      && a.hasAlpha == b.hasAlpha && a.sourceWidth == b.sourceWidth
      && a.sourceHeight == b.sourceHeight && a.orientation == b.orientation
      && a.damageWarnings == b.damageWarnings && a.source == b.source
      && a.decodedFromDCScans == b.decodedFromDCScans
  }

  /// Hashes what `==` compares.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(digest)
    hasher.combine(format)
    hasher.combine(width)
    hasher.combine(height)
    hasher.combine(source)
  }
}
