import CImageCodecs

/// An encoded image format thumbd reads and writes.
public enum ImageFormat: String, Sendable, Hashable, CaseIterable {
  case jpeg
  case png

  /// The format named by the first bytes, or nil when they are neither JPEG nor PNG.
  public static func sniff<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> ImageFormat? {
    let head = Array(bytes.prefix(8))
    return head.withUnsafeBufferPointer { ImageFormat(ic_sniff($0.baseAddress, $0.count)) }
  }

  /// The conventional file extension.
  public var fileExtension: String { self == .jpeg ? "jpg" : "png" }

  /// The media type for HTTP.
  public var mimeType: String { self == .jpeg ? "image/jpeg" : "image/png" }

  init?(_ format: ic_format) {
    switch format {
    case IC_FORMAT_JPEG: self = .jpeg
    case IC_FORMAT_PNG: self = .png
    default: return nil
    }
  }
}
