import CImageCodecs

/// Where a window sits in what it is cut from, or a picture on a larger canvas: imgproxy's
/// gravity. Offsets move it away from the edges it is anchored to (both ways from the
/// centre); the window never leaves what it is cut from.
public struct Gravity: Sendable, Hashable {
  /// The anchor, named as imgproxy names it.
  public enum Kind: String, Sendable, Hashable, CaseIterable {
    case centre = "ce"
    case north = "no"
    case south = "so"
    case east = "ea"
    case west = "we"
    case northEast = "noea"
    case northWest = "nowe"
    case southEast = "soea"
    case southWest = "sowe"
    /// Centred on a focus point (`focusX`, `focusY`).
    case focus = "fp"
    /// The part with the most detail, saturation and skin tone (a cover crop only).
    case smart = "sm"
  }

  /// The anchor.
  public var kind: Kind
  /// With `focus`: the point, as fractions of the width and height (0...1).
  public var focusX: Double
  /// With `focus`: the point, as fractions of the width and height (0...1).
  public var focusY: Double
  /// Horizontal offset, in the pixels of what is cut (output points for the box's crop); below
  /// 1 either way, a fraction of the width.
  public var offsetX: Double
  /// Vertical offset, in the same pixels.
  public var offsetY: Double

  /// A gravity.
  public init(
    _ kind: Kind, focusX: Double = 0.5, focusY: Double = 0.5, offsetX: Double = 0,
    offsetY: Double = 0
  ) {
    self.kind = kind
    self.focusX = focusX
    self.focusY = focusY
    self.offsetX = offsetX
    self.offsetY = offsetY
  }

  /// The centre, without offsets (the default).
  public static let centre = Gravity(.centre)

  /// The canonical text: `kind[:x:y]`, the focus for `fp`, else the offsets when not zero.
  var key: String {
    switch kind {
    case .focus: "fp:\(focusX):\(focusY)"
    case .smart: "sm"
    default: offsetX == 0 && offsetY == 0 ? kind.rawValue : "\(kind.rawValue):\(offsetX):\(offsetY)"
    }
  }

  func check(_ what: String, smart: Bool) throws(ThumbnailError) {
    guard smart || kind != .smart else {
      throw .invalidSpec("\(what): smart gravity places crops only")
    }
    guard kind != .focus || ((0...1).contains(focusX) && (0...1).contains(focusY)) else {
      throw .invalidSpec("\(what): a focus point is two fractions, each 0 to 1")
    }
    let limit = Double(Geometry.maxSide)
    guard offsetX.isFinite, offsetY.isFinite, abs(offsetX) <= limit, abs(offsetY) <= limit else {
      throw .invalidSpec("\(what): offsets must be at most \(Geometry.maxSide) pixels")
    }
  }

  /// The codecs' form: offsets in points made pixels by `scale`; an offset below 1 either way
  /// is a fraction of the side (imgproxy's relative offsets), which no scale changes.
  func cValue(scale: Double) -> ic_anchor {
    let pixels = { (offset: Double) in abs(offset) < 1 ? offset : offset * scale }
    return ic_anchor(
      type: ic_gravity(UInt32(Kind.allCases.firstIndex(of: kind)!)), focus_x: focusX,
      focus_y: focusY, offset_x: pixels(offsetX), offset_y: pixels(offsetY))
  }
}

/// An opaque colour.
public struct RGBColour: Sendable, Hashable {
  /// The channels.
  public var red, green, blue: UInt8

  /// A colour.
  public init(red: UInt8, green: UInt8, blue: UInt8) {
    (self.red, self.green, self.blue) = (red, green, blue)
  }

  /// Six hex digits, lower case.
  public var hex: String {
    [red, green, blue].map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
  }
}

/// Space added around the result, in points (the spec's scale makes them pixels).
public struct Padding: Sendable, Hashable {
  /// The sides.
  public var top, right, bottom, left: Int

  /// Padding; CSS's order.
  public init(top: Int = 0, right: Int = 0, bottom: Int = 0, left: Int = 0) {
    (self.top, self.right, self.bottom, self.left) = (top, right, bottom, left)
  }
}

/// Borders of one colour cut before anything else (imgproxy's `t`), decided on a small
/// resample of the whole picture.
public struct Trim: Sendable, Hashable {
  /// How far (0...255, on any channel) a pixel may be from the colour and be border.
  public var threshold: Double
  /// The border colour; nil for the top-left pixel's.
  public var colour: RGBColour?
  /// Cut as much from the right as from the left.
  public var equalHorizontal = false
  /// Cut as much from the bottom as from the top.
  public var equalVertical = false

  /// A trim.
  public init(
    threshold: Double, colour: RGBColour? = nil, equalHorizontal: Bool = false,
    equalVertical: Bool = false
  ) {
    (self.threshold, self.colour) = (threshold, colour)
    (self.equalHorizontal, self.equalVertical) = (equalHorizontal, equalVertical)
  }

  var key: String {
    "\(threshold):\(colour?.hex ?? "-"):\(equalHorizontal ? 1 : 0)\(equalVertical ? 1 : 0)"
  }
}

/// What happens around the resize, in displayed (upright) terms: a crop of the source, where
/// a cover crop's window sits, rotation and mirroring, extending to the box, padding, and the
/// background that fills what is added. Each field is one of imgproxy's processing options
/// (docs/PROTOCOL.md, "Geometry and filters"). The default does nothing.
public struct Geometry: Sendable, Hashable {
  /// The largest crop side, offset or padding (in pixels) a request may ask for.
  public static let maxSide = Int(IC_MAX_GEOMETRY)

  /// Where a cover crop's window sits (`g`); offsets in output points.
  public var gravity = Gravity.centre
  /// A crop of the source before resizing (`c`), in source pixels, or fractions below 1;
  /// 0 keeps that side whole.
  public var cropWidth: Double = 0
  /// The crop's height, as `cropWidth`.
  public var cropHeight: Double = 0
  /// Where that crop sits; nil for `gravity` (offsets in source pixels). Smart: the crop,
  /// and any crop of the box inside it, are placed together on the most interesting part.
  public var cropGravity: Gravity?
  /// Clockwise rotation after the EXIF orientation (`rot`): 0, 90, 180 or 270.
  public var rotation = 0
  /// Mirroring after the rotation (`fl`).
  public var flipHorizontal = false
  /// Mirroring after the rotation (`fl`).
  public var flipVertical = false
  /// Where a result smaller than the box sits on a canvas of the box's size (`ex`); nil
  /// leaves the result its own size.
  public var extend: Gravity?
  /// Space added around the result (`pd`).
  public var padding = Padding()
  /// What fills added space, and what a result with alpha is flattened onto (`bg`); nil
  /// leaves added space transparent.
  public var background: RGBColour?
  /// Borders cut first (`t`); nil for none. The size a placeholder announces is then the
  /// untrimmed picture's: the trim is known only from the pixels.
  public var trim: Trim?

  /// Nothing around the resize.
  public init() {}

  /// Whether this does nothing.
  public var isIdentity: Bool { self == Geometry() }

  /// Throws `invalidSpec` when a field is out of range; `scale` turns points into pixels.
  func validate(scale: Double) throws(ThumbnailError) {
    try gravity.check("gravity", smart: true)
    try cropGravity?.check("crop", smart: true)
    try extend?.check("extend", smart: false)
    let limit = Double(Self.maxSide)
    for side in [cropWidth, cropHeight] {
      guard side.isFinite, side >= 0, side <= limit else {
        throw .invalidSpec("crop sides must be 0 to \(Self.maxSide) pixels, or fractions")
      }
    }
    if let trim, !(trim.threshold.isFinite && (0...255).contains(trim.threshold)) {
      throw .invalidSpec("trim's threshold must be 0 to 255")
    }
    guard [0, 90, 180, 270].contains(rotation) else {
      throw .invalidSpec("rotation must be 0, 90, 180 or 270")
    }
    for side in [padding.top, padding.right, padding.bottom, padding.left] {
      guard side >= 0, Double(side) * scale <= Double(ThumbnailSpec.maxPixelSide) else {
        throw .invalidSpec("padding may be at most \(ThumbnailSpec.maxPixelSide) pixels a side")
      }
    }
  }

  /// The canonical text of every field that is not its default, for cache keys: equal
  /// geometries have equal keys, whatever order a request named them in.
  public var key: String {
    var parts: [String] = []
    if gravity != .centre { parts.append("g=" + gravity.key) }
    if cropWidth != 0 || cropHeight != 0 {
      parts.append("c=\(cropWidth)x\(cropHeight)@" + (cropGravity ?? gravity).key)
    }
    if rotation != 0 { parts.append("rot=\(rotation)") }
    if flipHorizontal || flipVertical {
      parts.append("fl=\(flipHorizontal ? 1 : 0)\(flipVertical ? 1 : 0)")
    }
    if let extend { parts.append("ex=" + extend.key) }
    if padding != Padding() {
      parts.append("pd=\(padding.top),\(padding.right),\(padding.bottom),\(padding.left)")
    }
    if let background { parts.append("bg=" + background.hex) }
    if let trim { parts.append("t=" + trim.key) }
    return parts.joined(separator: ";")
  }

  /// Makes a crop in pixels (and its offsets) `factor` times as long: for a picture that
  /// stands for its source at another size (a video's frame).
  mutating func scaleCrop(by factor: Double) {
    guard factor.isFinite, factor > 0 else { return }
    if cropWidth >= 1 { cropWidth = max(1, cropWidth * factor) }
    if cropHeight >= 1 { cropHeight = max(1, cropHeight * factor) }
    if cropWidth != 0 || cropHeight != 0 {
      var anchor = cropGravity ?? gravity
      if abs(anchor.offsetX) >= 1 { anchor.offsetX *= factor }
      if abs(anchor.offsetY) >= 1 { anchor.offsetY *= factor }
      cropGravity = anchor
    }
  }

  /// The codecs' form, with points made pixels by `scale`.
  func cValue(scale: Double) -> ic_geometry {
    var g = ic_geometry()
    g.gravity = gravity.cValue(scale: scale)
    g.crop_width = cropWidth
    g.crop_height = cropHeight
    g.crop_gravity = (cropGravity ?? gravity).cValue(scale: 1)
    g.rotate = Int32(rotation)
    g.flip_horizontal = flipHorizontal ? 1 : 0
    g.flip_vertical = flipVertical ? 1 : 0
    if let extend {
      g.extend = 1
      g.extend_gravity = extend.cValue(scale: scale)
    }
    let pixels = { (points: Int) in UInt32(clamping: Int((Double(points) * scale).rounded())) }
    g.pad_top = pixels(padding.top)
    g.pad_right = pixels(padding.right)
    g.pad_bottom = pixels(padding.bottom)
    g.pad_left = pixels(padding.left)
    if let background {
      g.has_background = 1
      g.background = (background.red, background.green, background.blue)
    }
    if let trim {
      g.trim = 1
      g.trim_threshold = trim.threshold
      if let colour = trim.colour {
        g.trim_has_colour = 1
        g.trim_colour = (colour.red, colour.green, colour.blue)
      }
      g.trim_equal_horizontal = trim.equalHorizontal ? 1 : 0
      g.trim_equal_vertical = trim.equalVertical ? 1 : 0
    }
    return g
  }
}

/// Filters on the result, after the crop and before extending and padding, in imgproxy's
/// order (blur, sharpen, pixelate). Sizes are in output points, so the spec's scale applies.
/// The default does nothing.
public struct Filters: Sendable, Hashable {
  /// The largest sigma, in pixels (with the scale applied).
  public static let maxSigma = IC_MAX_SIGMA

  /// A gaussian blur's sigma (`bl`); 0 for none.
  public var blur: Double = 0
  /// Sharpening's sigma (`sh`): an unsharp mask on lightness, through libvips' curve; 0 for
  /// none.
  public var sharpen: Double = 0
  /// Blocks this many points a side, each its average (`pix`); 0 for none.
  public var pixelate = 0

  /// No filter.
  public init() {}

  /// Whether this does nothing.
  public var isIdentity: Bool { self == Filters() }

  /// The canonical text of the filters that are on, for cache keys.
  public var key: String {
    var parts: [String] = []
    if blur > 0 { parts.append("bl=\(blur)") }
    if sharpen > 0 { parts.append("sh=\(sharpen)") }
    if pixelate > 0 { parts.append("pix=\(pixelate)") }
    return parts.joined(separator: ";")
  }

  func validate(scale: Double) throws(ThumbnailError) {
    for (name, sigma) in [("blur", blur), ("sharpen", sharpen)] {
      guard sigma.isFinite, sigma >= 0, sigma * scale <= Self.maxSigma else {
        throw .invalidSpec("\(name)'s sigma must be 0 to \(Self.maxSigma) pixels")
      }
    }
    guard pixelate >= 0, Double(pixelate) * scale <= Double(Geometry.maxSide) else {
      throw .invalidSpec("pixelate must be 0 to \(Geometry.maxSide) pixels")
    }
  }

  func cValue(scale: Double) -> ic_effects {
    ic_effects(
      blur_sigma: blur * scale, sharpen_sigma: sharpen * scale,
      pixelate: UInt32(clamping: Int((Double(pixelate) * scale).rounded())))
  }
}
