/// What making one thumbnail is expected to hold in memory at its peak, computed from the
/// source's header before any pixel is decoded (`Thumbnailer.estimate`): the decoder's
/// buffers (every coefficient of a progressive JPEG that is not decoded from its DC scans,
/// the whole image of an Adam7 PNG, rows otherwise), the resampler and the output.
public struct MemoryEstimate: Sendable, Hashable {
  /// Peak bytes of the decode, resampling and encoding together.
  public var bytes: Int
  /// The size the decoder delivers, after DCT scaling.
  public var decodeWidth: Int
  /// The size the decoder delivers, after DCT scaling.
  public var decodeHeight: Int
  /// The stored size from the header.
  public var sourceWidth: Int
  /// The stored size from the header.
  public var sourceHeight: Int
  /// Bytes the process itself keeps from the first run of this decoder or encoder (the code
  /// of a library opened on first use: about 16 MiB for HEIC's), while no such run has ended
  /// in this process; then 0. Not part of `bytes`: it is the process's, not the decode's.
  public var firstUse: Int

  /// Creates an estimate.
  public init(
    bytes: Int, decodeWidth: Int, decodeHeight: Int, sourceWidth: Int, sourceHeight: Int,
    firstUse: Int = 0
  ) {
    self.bytes = bytes
    self.firstUse = firstUse
    self.decodeWidth = decodeWidth
    self.decodeHeight = decodeHeight
    self.sourceWidth = sourceWidth
    self.sourceHeight = sourceHeight
  }
}
