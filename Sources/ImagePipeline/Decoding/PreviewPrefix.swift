import CImageCodecs

/// Watches a download's bytes for the point where a preview can be made before the rest
/// arrives (`Thumbnailer.preview(_:spec:cancellation:)` on the first `readySize` bytes): a
/// JPEG's EXIF thumbnail once the first scan's header is in, a progressive JPEG's first DC
/// scans once the marker after them is. Each byte is looked at once, however often it is asked.
public struct PreviewPrefix: Sendable {
  /// What the bytes so far offer.
  public enum Verdict: Sendable, Equatable {
    /// Nothing yet: look again when more bytes have arrived.
    case more
    /// A preview can be made from the first `readySize` bytes.
    case ready(readySize: Int)
    /// None will come before the whole file.
    case none
  }

  private var scan = ic_prefix_scan()

  /// A watch from the first byte.
  public init() {}

  /// Looks at `bytes`: the download so far, the same bytes as on the last call and more.
  public mutating func look(at bytes: UnsafeRawBufferPointer) -> Verdict {
    let verdict = ic_preview_prefix(
      bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, &scan)
    switch verdict {
    case IC_PREFIX_READY: return .ready(readySize: scan.ready_size)
    case IC_PREFIX_NONE: return .none
    default: return .more
    }
  }
}
