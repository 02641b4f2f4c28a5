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
  /// Seconds a decode may take, wall clock (`timedOut` beyond); 0 for no deadline. The guard
  /// behind the specific limits below: whatever input slips past them still ends.
  public var decodeTimeout: Double
  /// Most scans a JPEG may have (`tooComplex` beyond): real encoders write about 10, and a
  /// repeated scan raises no warning, so only a count stops a file made of thousands.
  public var maxScans: Int
  /// Blocks a JPEG's scans may decode in all, in whole-image passes (`tooComplex` beyond): a
  /// progressive file from jpegtran or mozjpeg needs 5-6.
  public var maxScanPasses: Int
  /// Largest embedded colour profile read, in bytes; a larger one is ignored (the image is
  /// taken as sRGB) and never buffered past this. 0 ignores every profile.
  public var maxProfileBytes = 4 << 20

  /// Creates limits; the defaults are 65535 px a side, 100 MP and 512 MiB, strict, 10 s a
  /// decode, 64 scans and 16 passes of scan work.
  public init(
    maxWidth: Int = 65_535, maxHeight: Int = 65_535, maxPixels: Int = 100_000_000,
    maxDecoderMemory: Int = 512 << 20, acceptDamaged: Bool = false, decodeTimeout: Double = 10,
    maxScans: Int = 64, maxScanPasses: Int = 16
  ) {
    self.maxWidth = maxWidth
    self.maxHeight = maxHeight
    self.maxPixels = maxPixels
    self.maxDecoderMemory = maxDecoderMemory
    self.acceptDamaged = acceptDamaged
    self.decodeTimeout = decodeTimeout
    self.maxScans = maxScans
    self.maxScanPasses = maxScanPasses
  }
}
