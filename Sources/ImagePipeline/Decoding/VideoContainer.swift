/// The video containers whose frames thumbd shows, through a `FrameExtractor` (thumbd's own
/// is the `thumbd-frame` worker in a sandbox): each carries its own traits (how its first
/// bytes look, its media types and file extensions), as `SourceFormat` does for images.
///
/// Recognised by content only: a file named `.mp4` that holds a JPEG is a JPEG, and an
/// ISO-BMFF file whose brands are HEIF's or AVIF's is an image (`SourceFormat` is asked first).
public enum VideoContainer: String, CaseIterable, Sendable {
  /// ISO base media (MP4, M4V, 3GP) and QuickTime (MOV).
  case mp4
  /// Matroska and WebM.
  case matroska
  /// AVI (RIFF).
  case avi
  /// MPEG transport streams, with or without the 4-byte timestamps of M2TS/MTS.
  case mpegTS
  /// MPEG program streams (MPG, VOB) and MPEG video elementary streams.
  case mpegPS
  /// Flash video.
  case flv
  /// Ogg (Theora).
  case ogg
  /// Windows Media (ASF, WMV).
  case asf

  /// How many first bytes `sniff` looks at.
  public static let sniffLength = 400

  /// The container `head` (a file's first bytes, up to `sniffLength`) is in, or nil; nil for
  /// any file `SourceFormat` reads.
  public static func sniff<Bytes: Collection<UInt8>>(_ head: Bytes) -> VideoContainer? {
    let bytes = Array(head.prefix(sniffLength))
    guard SourceFormat.sniff(bytes) == nil else { return nil }
    func at(_ offset: Int, _ text: String) -> Bool {
      let wanted = Array(text.utf8)
      return bytes.count >= offset + wanted.count
        && Array(bytes[offset..<offset + wanted.count]) == wanted
    }
    func starts(_ magic: [UInt8]) -> Bool { bytes.starts(with: magic) }
    // ISO-BMFF's ftyp, or a QuickTime file's first atom.
    if ["ftyp", "moov", "mdat", "wide", "free", "skip", "pnot"].contains(where: { at(4, $0) }) {
      return .mp4
    }
    if starts([0x1A, 0x45, 0xDF, 0xA3]) { return .matroska }
    if at(0, "RIFF") && (at(8, "AVI ") || at(8, "AVIX")) { return .avi }
    // Sync bytes every 188 bytes (192 for M2TS, after a 4-byte timestamp).
    for (first, step) in [(0, 188), (4, 192)]
    where bytes.count > first + 2 * step
      && (0..<3).allSatisfy({ bytes[first + $0 * step] == 0x47 })
    {
      return .mpegTS
    }
    if starts([0, 0, 1, 0xBA]) || starts([0, 0, 1, 0xB3]) { return .mpegPS }
    if at(0, "FLV") && bytes.count > 3 && bytes[3] == 1 { return .flv }
    if at(0, "OggS") { return .ogg }
    if starts([0x30, 0x26, 0xB2, 0x75, 0x8E, 0x66, 0xCF, 0x11]) { return .asf }
    return nil
  }

  /// The media types shared-mime-info gives files of this container (the desktop's
  /// `GetSupported` and thumbnailer entries use them).
  public var mediaTypes: [String] {
    switch self {
    case .mp4:
      ["video/mp4", "video/quicktime", "video/x-m4v", "video/3gpp", "video/3gpp2"]
    case .matroska: ["video/x-matroska", "video/webm"]
    case .avi: ["video/x-msvideo", "video/vnd.avi", "video/avi", "video/msvideo"]
    case .mpegTS: ["video/mp2t"]
    case .mpegPS: ["video/mpeg", "video/x-mpeg2"]
    case .flv: ["video/x-flv", "video/flv"]
    case .ogg: ["video/ogg", "video/x-ogm+ogg", "video/x-theora+ogg"]
    case .asf: ["video/x-ms-wmv", "video/x-ms-asf", "application/vnd.ms-asf"]
    }
  }

  /// The media type a thumbnail's source is reported as.
  public var mediaType: String { mediaTypes[0] }

  /// The extensions files of this container are named with, lower case.
  public var fileExtensions: [String] {
    switch self {
    case .mp4: ["mp4", "m4v", "mov", "qt", "3gp", "3g2"]
    case .matroska: ["mkv", "webm"]
    case .avi: ["avi"]
    case .mpegTS: ["ts", "mts", "m2ts"]
    case .mpegPS: ["mpg", "mpeg", "vob", "m2v"]
    case .flv: ["flv"]
    case .ogg: ["ogv"]
    case .asf: ["wmv", "asf"]
    }
  }

  /// Every container's media types, for the desktop's lists.
  public static var desktopMediaTypes: [String] { allCases.flatMap(\.mediaTypes) }
}

/// Makes a still picture of a source thumbd does not decode in its own process (a video's
/// frame, a PDF's first page, an SVG), as an image thumbd decodes, which the caller decodes
/// again under its own limits. The pipeline (`PipelineConfiguration.frames`), the desktop and
/// the CLI take one; thumbd's is `VideoFrames`, its worker in a sandbox.
public protocol FrameExtractor: Sendable {
  /// The picture of the file open at `descriptor` (read from its start, never closed here),
  /// which holds `source`, named `name` (only its extension may be used), for a box of
  /// `width` x `height` (0 leaves a side free): at least the box's size where the source has
  /// it. Blocks the calling thread. `cancellation` stops it. Errors are typed as a decode's
  /// are.
  func frame(
    ofFile descriptor: Int32, source: FrameSource, name: String, width: Int, height: Int,
    limits: DecodingLimits, cancellation: CancellationFlag?
  ) throws(ThumbnailError) -> ExtractedFrame
}

/// A still picture a `FrameExtractor` made.
public struct ExtractedFrame: Sendable {
  /// The picture, encoded in a format `SourceFormat` reads (thumbd's worker writes a BMP).
  public var image: [UInt8]
  /// Where in the video the frame is, when known.
  public var time: Duration?
  /// How long the video is, when known (the freedesktop entry's `Thumb::Movie::Length`).
  public var duration: Duration?
  /// The video's displayed size (its sample aspect ratio and rotation applied), when known:
  /// what the thumbnail reports as its source's size.
  public var sourceSize: (Int, Int)?

  /// A picture `image`, at `time` of a video `duration` long, shown at `sourceSize`.
  public init(
    image: [UInt8], time: Duration? = nil, duration: Duration? = nil,
    sourceSize: (Int, Int)? = nil
  ) {
    self.image = image
    self.time = time
    self.duration = duration
    self.sourceSize = sourceSize
  }
}
