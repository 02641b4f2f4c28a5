import CImageCodecs

/// A format thumbd reads, named by a source's first bytes (never by its file name).
public enum SourceFormat: String, Sendable, Hashable, CaseIterable {
  case jpeg
  case png
  case webp
  case gif
  /// HEIF with HEVC-coded images, as phones write them.
  case heic
  /// HEIF with AV1-coded images.
  case avif
  /// Windows and OS/2 bitmaps (BMP).
  case bmp
  /// Windows icons and cursors (ICO and CUR): the image nearest the output size is read.
  case ico
  /// TIFF: the first page, or its smallest reduced-resolution level that covers the output.
  case tiff
  /// Camera RAW (CR2, CR3, CRW, NEF, ARW, DNG, ORF, RW2, PEF, RAF...): the JPEG preview the
  /// camera embedded, never a demosaic. A raw without one is refused as unsupported.
  case raw
  /// JPEG XL: the first frame (libjxl, loaded when the first one is read).
  case jxl

  /// The format named by the first bytes (32 are enough), or nil when no decoder reads them.
  public static func sniff<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> SourceFormat? {
    let head = Array(bytes.prefix(32))
    return head.withUnsafeBufferPointer { SourceFormat(ic_sniff($0.baseAddress, $0.count)) }
  }

  /// Every format read, by display name, for messages and help: "JPEG, PNG, ... and ICO".
  public static var readableList: String {
    let names = allCases.map(\.displayName)
    return names.dropLast().joined(separator: ", ") + " and " + names.last!
  }

  /// The codecs' value for this format.
  var codecFormat: ic_format {
    switch self {
    case .jpeg: IC_FORMAT_JPEG
    case .png: IC_FORMAT_PNG
    case .webp: IC_FORMAT_WEBP
    case .gif: IC_FORMAT_GIF
    case .heic: IC_FORMAT_HEIC
    case .avif: IC_FORMAT_AVIF
    case .bmp: IC_FORMAT_BMP
    case .ico: IC_FORMAT_ICO
    case .tiff: IC_FORMAT_TIFF
    case .raw: IC_FORMAT_RAW
    case .jxl: IC_FORMAT_JXL
    }
  }

  /// The codec table's row for this format (codecs.c): its traits live there, once.
  private var info: ic_format_info {
    var info = ic_format_info()
    _ = ic_format_info_of(codecFormat, &info)
    return info
  }

  /// The format's display name, from the codec table ("JPEG", "WebP"...).
  public var displayName: String { info.name.map { String(cString: $0) } ?? "unknown" }

  /// The media (MIME) type a desktop names it by: the thumbnail cache's `Thumb::Mimetype`, the
  /// types a `.thumbnailer` entry and `GetSupported` list. From the codec table.
  public var mediaType: String { info.media_type.map { String(cString: $0) } ?? "" }

  /// The file name extensions the format is found under (lower case; the first is the usual
  /// one), from the codec table. Files are never judged by their names (`sniff` decides);
  /// this is for tools that pick example files, such as the fuzzer's seeds.
  public var fileExtensions: [String] {
    (info.extensions.map { String(cString: $0) } ?? "").split(separator: " ").map(String.init)
  }

  /// Every media type a desktop may name a format thumbd reads by: each format's own, and
  /// the other names shared-mime-info and thumbnailer entries use (`image/heif` for many HEIC
  /// files, `image/x-win-bitmap` for cursors, older aliases). The `.thumbnailer` entry's
  /// MimeType and the D-Bus service's `GetSupported` list these.
  public static var desktopMediaTypes: [String] {
    allCases.map(\.mediaType) + [
      "image/heif", "image/x-bmp", "image/x-ms-bmp", "image/x-icon", "image/x-win-bitmap",
    ] + rawMediaTypes
  }

  /// shared-mime-info's types of the camera RAW files thumbd reads a preview of.
  static let rawMediaTypes = [
    "image/x-adobe-dng", "image/x-canon-cr2", "image/x-canon-cr3", "image/x-canon-crw",
    "image/x-fuji-raf", "image/x-nikon-nef", "image/x-nikon-nrw", "image/x-olympus-orf",
    "image/x-panasonic-rw2", "image/x-pentax-pef", "image/x-samsung-srw", "image/x-sony-arw",
  ]

  init?(_ format: ic_format) {
    guard let match = Self.allCases.first(where: { $0.codecFormat == format }) else {
      return nil
    }
    self = match
  }
}

/// An encoded format thumbd writes.
public enum ImageFormat: String, Sendable, Hashable, CaseIterable {
  case jpeg
  case png
  case webp
  case avif
  /// Never chosen for a client by what it accepts: only when asked for by name (imgproxy's
  /// `f:gif`), for a site that must serve GIF.
  case gif

  /// The output format of encoded bytes, or nil when they are no format thumbd writes.
  public static func sniff<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> ImageFormat? {
    SourceFormat.sniff(bytes).flatMap(ImageFormat.init(source:))
  }

  /// The written format that is this source format, if thumbd writes it.
  public init?(source: SourceFormat) {
    switch source {
    case .jpeg: self = .jpeg
    case .png: self = .png
    case .webp: self = .webp
    case .avif: self = .avif
    case .gif: self = .gif
    case .heic, .bmp, .ico, .tiff, .raw, .jxl: return nil
    }
  }

  /// The same format as read.
  public var sourceFormat: SourceFormat {
    switch self {
    case .jpeg: .jpeg
    case .png: .png
    case .webp: .webp
    case .avif: .avif
    case .gif: .gif
    }
  }

  /// The conventional file extension.
  public var fileExtension: String {
    switch self {
    case .jpeg: "jpg"
    case .png: "png"
    case .webp: "webp"
    case .avif: "avif"
    case .gif: "gif"
    }
  }

  /// The media type for HTTP.
  public var mimeType: String {
    switch self {
    case .jpeg: "image/jpeg"
    case .png: "image/png"
    case .webp: "image/webp"
    case .avif: "image/avif"
    case .gif: "image/gif"
    }
  }

  /// Whether the format keeps an alpha channel (JPEG composites it over white; GIF keeps
  /// whether a pixel shows, at alpha 128).
  public var keepsAlpha: Bool {
    switch self {
    case .jpeg: false
    case .png, .webp, .avif, .gif: true
    }
  }

  /// Whether the format can hold an animation, which `ThumbnailSpec.maxFrames` above 1 keeps.
  public var animates: Bool {
    switch self {
    case .webp, .gif: true
    case .jpeg, .png, .avif: false
    }
  }

  /// The byte that stands for this format in the disk cache's metadata. Stable: entries
  /// written by older builds keep their meaning.
  var diskCode: UInt8 {
    switch self {
    case .jpeg: 0
    case .png: 1
    case .webp: 2
    case .avif: 3
    case .gif: 4
    }
  }

  /// The format a disk-cache byte stands for, or nil for a byte no build writes.
  init?(diskCode: UInt8) {
    guard let match = Self.allCases.first(where: { $0.diskCode == diskCode }) else {
      return nil
    }
    self = match
  }

  /// The codecs' value for this format.
  var codecFormat: ic_format { sourceFormat.codecFormat }

  init?(_ format: ic_format) {
    guard let source = SourceFormat(format) else { return nil }
    self.init(source: source)
  }
}
