import CImageCodecs

/// The drawings whose pictures thumbd shows through a `FrameExtractor` (thumbd's own is the
/// `thumbd-frame` worker in a sandbox, with poppler and librsvg): a PDF's first page and an
/// SVG. Each carries its own traits (how its first bytes look, its media types and file
/// extensions), as `VideoContainer` does for videos and `SourceFormat` for images.
///
/// Recognised by content only (a compressed SVG by what its first bytes inflate to): a file
/// named `.svg` that holds a PNG is a PNG.
public enum DrawingFormat: String, CaseIterable, Sendable {
  /// PDF: its first page.
  case pdf
  /// SVG, and SVGZ (gzip-compressed SVG).
  case svg

  /// How many first bytes `sniff` looks at: a PDF's header may follow up to 1,024 bytes of
  /// anything, and an SVG's root element may follow an XML declaration, comments and a
  /// document type.
  public static let sniffLength = 4096

  /// The drawing `head` (a file's first bytes, up to `sniffLength`) holds, or nil. Nil for
  /// any file `SourceFormat` reads.
  public static func sniff<Bytes: Collection<UInt8>>(_ head: Bytes) -> DrawingFormat? {
    let bytes = Array(head.prefix(sniffLength))
    guard SourceFormat.sniff(bytes) == nil else { return nil }
    if let at = find(Array("%PDF-".utf8), in: bytes), at <= 1024 { return .pdf }
    if bytes.starts(with: [0x1F, 0x8B]) {
      var inflated = [UInt8](repeating: 0, count: sniffLength)
      let count = inflated.withUnsafeMutableBufferPointer { out in
        bytes.withUnsafeBufferPointer {
          ic_gunzip_head($0.baseAddress, $0.count, out.baseAddress, out.count)
        }
      }
      return count > 0 && looksLikeSVG(Array(inflated[..<count])) ? .svg : nil
    }
    return looksLikeSVG(bytes) ? .svg : nil
  }

  /// XML whose root element is `svg` (or `prefix:svg`): after a byte-order mark, white
  /// space, an XML declaration, processing instructions, comments and a document type, all
  /// within the bytes looked at.
  static func looksLikeSVG(_ bytes: [UInt8]) -> Bool {
    var at = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
    func starts(_ text: String) -> Bool {
      let wanted = Array(text.utf8)
      return bytes.count >= at + wanted.count && Array(bytes[at..<at + wanted.count]) == wanted
    }
    /// Moves past `end`, found after `at`; false when the bytes end first.
    func skip(past end: String) -> Bool {
      guard let found = find(Array(end.utf8), in: Array(bytes[at...])) else { return false }
      at += found + end.utf8.count
      return true
    }
    let space: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
    // Each turn moves past one thing before the root, so the loop ends with the bytes.
    while at < bytes.count {
      if space.contains(bytes[at]) {
        at += 1
      } else if starts("<?") {
        guard skip(past: "?>") else { return false }
      } else if starts("<!--") {
        guard skip(past: "-->") else { return false }
      } else if starts("<!DOCTYPE") {
        // An internal subset ([...]) may hold `>`s of its own.
        let rest = Array(bytes[at...])
        let bracket = find([0x5B], in: rest)
        let close = find([0x3E], in: rest)
        guard let close else { return false }
        guard skip(past: bracket.map { $0 < close } == true ? "]>" : ">") else { return false }
      } else {
        break
      }
    }
    guard starts("<") else { return false }
    // The root's name: `svg`, or a prefix and `:svg`.
    var end = at + 1
    while end < bytes.count, !space.contains(bytes[end]), ![0x3E, 0x2F].contains(bytes[end]) {
      end += 1
    }
    guard end < bytes.count, end - at <= 64 else { return false }
    let name = Array(bytes[(at + 1)..<end])
    return name == Array("svg".utf8) || name.reversed().starts(with: Array(":svg".utf8).reversed())
  }

  private static func find(_ needle: [UInt8], in bytes: [UInt8]) -> Int? {
    guard bytes.count >= needle.count else { return nil }
    for start in 0...(bytes.count - needle.count)
    where bytes[start] == needle[0] && Array(bytes[start..<start + needle.count]) == needle {
      return start
    }
    return nil
  }

  /// The media types shared-mime-info gives files of this format (the desktop's
  /// `GetSupported` and thumbnailer entries use them).
  public var mediaTypes: [String] {
    switch self {
    case .pdf: ["application/pdf", "application/x-pdf", "image/pdf"]
    case .svg: ["image/svg+xml", "image/svg+xml-compressed", "image/svg"]
    }
  }

  /// The media type a thumbnail's source is reported as.
  public var mediaType: String { mediaTypes[0] }

  /// The extensions files of this format are named with, lower case.
  public var fileExtensions: [String] {
    switch self {
    case .pdf: ["pdf"]
    case .svg: ["svg", "svgz"]
    }
  }

  /// Every drawing format's media types, for the desktop's lists.
  public static var desktopMediaTypes: [String] { allCases.flatMap(\.mediaTypes) }
}

/// What a `FrameExtractor` makes a picture of: a video, or a drawing.
public enum FrameSource: Sendable, Hashable {
  /// A video in this container: a representative frame.
  case video(VideoContainer)
  /// A drawing: a PDF's first page, an SVG.
  case drawing(DrawingFormat)

  /// How many first bytes `sniff` looks at.
  public static let sniffLength = max(VideoContainer.sniffLength, DrawingFormat.sniffLength)

  /// What `head` (a file's first bytes) holds, when a frame extractor pictures it. Nil for
  /// any file `SourceFormat` reads.
  public static func sniff<Bytes: Collection<UInt8>>(_ head: Bytes) -> FrameSource? {
    if let container = VideoContainer.sniff(head) { return .video(container) }
    return DrawingFormat.sniff(head).map { .drawing($0) }
  }

  /// The media type a thumbnail's source is reported as.
  public var mediaType: String {
    switch self {
    case .video(let container): container.mediaType
    case .drawing(let format): format.mediaType
    }
  }

  /// The source's kind and format, for messages ("a video (mp4)", "a drawing (pdf)").
  public var description: String {
    switch self {
    case .video(let container): "a video (\(container.rawValue))"
    case .drawing(let format): "a drawing (\(format.rawValue))"
    }
  }

  /// Every media type a frame extractor pictures, for the desktop's lists.
  public static var desktopMediaTypes: [String] {
    VideoContainer.desktopMediaTypes + DrawingFormat.desktopMediaTypes
  }
}
