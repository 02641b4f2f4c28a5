/// Guards checked against an image header before any pixel is decoded.
public struct DecodingLimits: Sendable, Hashable {
  /// Longest accepted width, in pixels.
  public var maxWidth: Int
  /// Longest accepted height, in pixels.
  public var maxHeight: Int
  /// Largest accepted width x height.
  public var maxPixels: Int
  /// Cap on the JPEG decoder's working memory (progressive coefficient buffers).
  public var maxDecoderMemory: Int
  /// When true, damaged or truncated JPEGs give libjpeg's grey-padded image instead of an error.
  public var acceptDamaged: Bool

  /// Creates limits; the defaults are 65535 px a side, 100 MP and 512 MiB, strict.
  public init(
    maxWidth: Int = 65_535, maxHeight: Int = 65_535, maxPixels: Int = 100_000_000,
    maxDecoderMemory: Int = 512 << 20, acceptDamaged: Bool = false
  ) {
    self.maxWidth = maxWidth
    self.maxHeight = maxHeight
    self.maxPixels = maxPixels
    self.maxDecoderMemory = maxDecoderMemory
    self.acceptDamaged = acceptDamaged
  }
}
