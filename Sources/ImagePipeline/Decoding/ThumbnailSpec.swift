/// How a source is mapped into the target box.
public enum FitMode: String, Sendable, Hashable, CaseIterable, NamedChoice {
  /// Inside the box, aspect ratio kept (the default).
  case contain
  /// Fills the box, aspect ratio kept, centre cropped.
  case cover
  /// Exactly the box, aspect ratio ignored.
  case fill
  /// `cover` when the source and the box have the same orientation (both landscape, or both
  /// portrait or square), else `contain`: imgproxy's `rt:auto`.
  case auto
}

/// The encoding a caller asks for. `auto` is PNG when the result has alpha, JPEG otherwise;
/// a server may first resolve it from what the client accepts (`FormatNegotiation`).
public enum OutputFormat: String, Sendable, Hashable, CaseIterable, NamedChoice {
  case png
  case jpeg
  case webp
  case avif
  case gif
  case auto

  /// `auto` first, then the written formats: how messages and docs list them.
  public static var listed: [OutputFormat] { [.auto] + allCases.filter { $0 != .auto } }

  /// The written format this names, or nil for `auto`.
  public var imageFormat: ImageFormat? {
    switch self {
    case .png: .png
    case .jpeg: .jpeg
    case .webp: .webp
    case .avif: .avif
    case .gif: .gif
    case .auto: nil
    }
  }

  /// The request for one written format.
  public init(_ format: ImageFormat) {
    switch format {
    case .png: self = .png
    case .jpeg: self = .jpeg
    case .webp: self = .webp
    case .avif: self = .avif
    case .gif: self = .gif
    }
  }
}

/// What thumbnail to make: a box in points, a device scale, and how to encode it.
public struct ThumbnailSpec: Sendable, Hashable {
  /// Largest pixel size of either side the pipeline will produce.
  public static let maxPixelSide = 16_384

  /// Box width in points; 0 leaves the width unconstrained.
  public var width: Int
  /// Box height in points; 0 leaves the height unconstrained.
  public var height: Int
  /// Device pixel ratio: the pixel box is `width * scale` by `height * scale`.
  public var scale: Double
  /// How the source maps into the box.
  public var fit: FitMode
  /// The encoding to produce.
  public var format: OutputFormat
  /// Quality of the lossy formats (JPEG, WebP, AVIF), 1...100.
  public var quality: Int
  /// When false (the default) a thumbnail is never larger than its source.
  public var allowUpscale: Bool
  /// What happens to the source's colour profile.
  public var colour: ColourMode
  /// Crop, gravity, rotation, mirroring, extending, padding and background.
  public var geometry = Geometry()
  /// Blur, sharpening and pixelation.
  public var filters = Filters()
  /// A watermark laid over the result last; nil for none.
  public var watermark: WatermarkPlacement?
  /// With WebP or GIF output, how many frames of an animated GIF or WebP are kept, as an
  /// animation of that format (1, the default: the first frame alone, a still). Frames times
  /// the source's pixels must stay within the pixel limit.
  public var maxFrames = 1

  /// The frames a result of this spec may keep: `maxFrames` when its format animates, else 1.
  public var keptFrames: Int { format.imageFormat?.animates == true ? maxFrames : 1 }

  /// The most frames an animated result may keep.
  public static let maxAnimationFrames = 10_000

  /// Creates a spec; `ValidSpec` checks it.
  public init(
    width: Int, height: Int, scale: Double = 1, fit: FitMode = .contain,
    format: OutputFormat = .auto, quality: Int = 80, allowUpscale: Bool = false,
    colour: ColourMode = .srgb
  ) {
    self.colour = colour
    self.width = width
    self.height = height
    self.scale = scale
    self.fit = fit
    self.format = format
    self.quality = quality
    self.allowUpscale = allowUpscale
  }

  /// Box width in output pixels.
  public var pixelWidth: Int { Self.pixels(width, scale) }
  /// Box height in output pixels.
  public var pixelHeight: Int { Self.pixels(height, scale) }

  private static func pixels(_ points: Int, _ scale: Double) -> Int {
    guard scale.isFinite, points > 0 else { return 0 }
    // Saturates: a client's h=4777777777777777772&scale=2 must fail validate(), not trap in
    // the conversion (found by fuzzing).
    let value = (Double(points) * scale).rounded()
    return value >= 0x1p62 ? 1 << 62 : max(1, Int(max(value, 0)))
  }

  /// Throws `invalidSpec` when a field is out of range.
  public func validate() throws(ThumbnailError) {
    guard width >= 0, height >= 0, width > 0 || height > 0 else {
      throw .invalidSpec("the box's width (w) and height (h) must be 0 or more, and not both 0")
    }
    guard scale.isFinite, scale >= 0.1, scale <= 8 else {
      throw .invalidSpec("scale must be between 0.1 and 8")
    }
    guard pixelWidth <= Self.maxPixelSide, pixelHeight <= Self.maxPixelSide else {
      throw .invalidSpec("the pixel box may be at most \(Self.maxPixelSide) a side")
    }
    guard (1...100).contains(quality) else {
      throw .invalidSpec("quality must be between 1 and 100")
    }
    try geometry.validate(scale: scale)
    try filters.validate(scale: scale)
    try watermark?.validate()
    guard (1...Self.maxAnimationFrames).contains(maxFrames) else {
      throw .invalidSpec("frames must be 1 to \(Self.maxAnimationFrames)")
    }
  }
}
