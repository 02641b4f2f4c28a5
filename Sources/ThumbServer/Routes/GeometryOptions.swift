import ImagePipeline

/// imgproxy's geometry, filter and watermark options, read into `Geometry`, `Filters` and a
/// `WatermarkRequest`: `g`, `c`, `rot`, `fl`, `pd`, `bg`, `el`, `ex` (and the enlarge and
/// extend of `rs` and `s`), `bl`, `sh`, `pix` and `wm`. The one reader of their
/// arguments: the path form, the query form (`gravity=no:10:5` is `gravity:no:10:5`), the
/// session's `options` and the CLI's `--options` all come here.
enum GeometryOptions {
  /// The option names this reads, short and long, as imgproxy spells them.
  static let names: Set<Substring> = [
    "g", "gravity", "c", "crop", "rot", "rotate", "fl", "flip", "pd", "padding", "bg",
    "background", "el", "enlarge", "ex", "extend", "bl", "blur", "sh", "sharpen", "pix",
    "pixelate", "wm", "watermark", "t", "trim",
  ]

  /// Applies option `name` with `arguments`; the problem when they are not valid.
  static func apply(
    _ name: Substring, _ arguments: ArraySlice<Substring>, to options: inout ImageOptions
  ) -> ParameterError? {
    do throws(ParameterError) {
      switch name {
      case "g", "gravity":
        options.geometry.gravity = try gravity(name, arguments, smart: true)
      case "c", "crop":
        guard arguments.count >= 1 else { throw ParameterError("\(name): give a width") }
        options.geometry.cropWidth = try cropSide(name, arguments.first!)
        options.geometry.cropHeight = 0
        if let height = arguments.dropFirst().first {
          options.geometry.cropHeight = try cropSide(name, height)
        }
        let rest = arguments.dropFirst(2)
        options.geometry.cropGravity =
          rest.isEmpty || rest.first!.isEmpty ? nil : try gravity(name, rest, smart: true)
      case "rot", "rotate":
        guard arguments.count == 1, let angle = Int(arguments.first!), angle % 90 == 0 else {
          throw ParameterError("\(name): the angle must be a multiple of 90")
        }
        options.geometry.rotation = (angle % 360 + 360) % 360
      case "fl", "flip":
        guard (1...2).contains(arguments.count) else {
          throw ParameterError("\(name): give horizontal[:vertical]")
        }
        options.geometry.flipHorizontal = try flag(name, arguments.first!)
        options.geometry.flipVertical = false
        if let vertical = arguments.dropFirst().first {
          options.geometry.flipVertical = try flag(name, vertical)
        }
      case "pd", "padding":
        options.geometry.padding = try padding(name, arguments)
      case "bg", "background":
        options.geometry.background = try colour(name, arguments)
      case "el", "enlarge":
        guard arguments.count == 1 else { throw ParameterError("\(name): give 1 or 0") }
        options.enlarge = try flag(name, arguments.first!)
      case "ex", "extend":
        try extend(name, arguments, into: &options)
      case "bl", "blur":
        options.filters.blur = try sigma(name, arguments)
      case "sh", "sharpen":
        options.filters.sharpen = try sigma(name, arguments)
      case "t", "trim":
        options.geometry.trim = try trim(name, arguments)
      case "wm", "watermark":
        options.watermark = try watermark(name, arguments)
      case "pix", "pixelate":
        guard arguments.count == 1, let size = Int(arguments.first!),
          (0...Geometry.maxSide).contains(size)
        else { throw ParameterError("\(name): the size must be 0 to \(Geometry.maxSide)") }
        options.filters.pixelate = size
      default:
        throw ParameterError("option '\(name)' is not supported")
      }
      return nil
    } catch {
      return error
    }
  }

  /// `OPACITY[:POSITION[:X:Y[:SCALE[:NAME]]]]`; POSITION is a compass gravity or `re`
  /// (replicate, the offsets then the gaps between tiles). Opacity 0 is none.
  static func watermark(
    _ name: Substring, _ arguments: ArraySlice<Substring>
  ) throws(ParameterError) -> WatermarkRequest? {
    guard (1...6).contains(arguments.count) else {
      throw ParameterError("\(name): give OPACITY[:POSITION:X:Y:SCALE:NAME]")
    }
    let parts = Array(arguments)
    func number(_ index: Int, _ range: ClosedRange<Double>) throws(ParameterError) -> Double? {
      guard index < parts.count, !parts[index].isEmpty else { return nil }
      guard let value = Double(parts[index]), value.isFinite, range.contains(value) else {
        throw ParameterError(
          "\(name): '\(parts[index])' must be \(range.lowerBound) to \(range.upperBound)")
      }
      return value
    }
    let opacity = try number(0, 0...1) ?? 0
    guard opacity > 0 else { return nil }
    var request = WatermarkRequest(opacity: opacity)
    let limit = Double(Geometry.maxSide)
    let x = try number(2, -limit...limit) ?? 0
    let y = try number(3, -limit...limit) ?? 0
    if parts.count > 1, !parts[1].isEmpty {
      if parts[1] == "re" {
        guard x >= 0, y >= 0 else { throw ParameterError("\(name): gaps must be 0 or more") }
        request.replicate = true
        request.position = Gravity(.centre, offsetX: x, offsetY: y)
      } else {
        guard let kind = Gravity.Kind(rawValue: String(parts[1])), kind != .focus, kind != .smart
        else { throw ParameterError("\(name): position must be a compass gravity or re") }
        request.position = Gravity(kind, offsetX: x, offsetY: y)
      }
    } else {
      request.position = Gravity(.centre, offsetX: x, offsetY: y)
    }
    request.scale = try number(4, 0...1) ?? 0
    if parts.count > 5, !parts[5].isEmpty { request.name = String(parts[5]) }
    return request
  }

  /// `THRESHOLD[:COLOUR[:EQUAL_HOR[:EQUAL_VER]]]`, COLOUR six hex digits (empty: the top-left
  /// pixel's).
  static func trim(
    _ name: Substring, _ arguments: ArraySlice<Substring>
  ) throws(ParameterError) -> Trim? {
    let parts = Array(arguments)
    guard (1...4).contains(parts.count), let threshold = Double(parts[0]), threshold.isFinite,
      (0...255).contains(threshold)
    else { throw ParameterError("\(name): the threshold must be 0 to 255") }
    var trim = Trim(threshold: threshold)
    if parts.count > 1, !parts[1].isEmpty {
      trim.colour = try colour(name, parts[1...1])
    }
    if parts.count > 2, !parts[2].isEmpty { trim.equalHorizontal = try flag(name, parts[2]) }
    if parts.count > 3, !parts[3].isEmpty { trim.equalVertical = try flag(name, parts[3]) }
    return trim
  }

  /// A blur or sharpen sigma: 0 (none) to `Filters.maxSigma`.
  static func sigma(
    _ name: Substring, _ arguments: ArraySlice<Substring>
  ) throws(ParameterError) -> Double {
    guard arguments.count == 1, let value = Double(arguments.first!), value.isFinite,
      (0...Filters.maxSigma).contains(value)
    else { throw ParameterError("\(name): sigma must be 0 to \(Filters.maxSigma)") }
    return value
  }

  /// `ex:EXTEND[:GRAVITY[:X:Y]]`, also the extend argument of `rs` and `s`.
  static func extend(
    _ name: Substring, _ arguments: ArraySlice<Substring>, into options: inout ImageOptions
  ) throws(ParameterError) {
    guard let first = arguments.first else { throw ParameterError("\(name): give 1 or 0") }
    let rest = arguments.dropFirst()
    options.geometry.extend =
      try flag(name, first)
      ? (rest.isEmpty || rest.first!.isEmpty ? .centre : try gravity(name, rest, smart: false))
      : nil
  }

  /// imgproxy's booleans: `1`, `t`, `true`, `0`, `f`, `false`.
  static func flag(_ name: Substring, _ text: Substring) throws(ParameterError) -> Bool {
    switch text {
    case "1", "t", "true": return true
    case "0", "f", "false": return false
    default: throw ParameterError("\(name): '\(text)' is not a boolean")
    }
  }

  /// `TYPE[:X:Y]`, or `fp:X:Y` (a focus point), or `sm`.
  static func gravity(
    _ name: Substring, _ arguments: ArraySlice<Substring>, smart: Bool
  ) throws(ParameterError) -> Gravity {
    guard let type = arguments.first, let kind = Gravity.Kind(rawValue: String(type)) else {
      let names = Gravity.Kind.allCases.map(\.rawValue).joined(separator: " ")
      throw ParameterError("\(name): gravity must be one of \(names)")
    }
    guard smart || kind != .smart else {
      throw ParameterError("\(name): smart gravity places crops only (g:sm, c:W:H:sm)")
    }
    let numbers = arguments.dropFirst()
    guard numbers.count <= 2 else { throw ParameterError("\(name): too many arguments") }
    var values: [Double] = []
    for text in numbers {
      guard let value = Double(text), value.isFinite else {
        throw ParameterError("\(name): '\(text)' is not a number")
      }
      values.append(value)
    }
    switch kind {
    case .focus:
      guard values.count == 2, values.allSatisfy({ (0...1).contains($0) }) else {
        throw ParameterError("\(name): a focus point is fp:X:Y, each 0 to 1")
      }
      return Gravity(.focus, focusX: values[0], focusY: values[1])
    case .smart:
      guard values.isEmpty else { throw ParameterError("\(name): sm takes no offsets") }
      return Gravity(.smart)
    default:
      let limit = Double(Geometry.maxSide)
      guard values.allSatisfy({ abs($0) <= limit }) else {
        throw ParameterError("\(name): offsets must be at most \(Geometry.maxSide)")
      }
      return Gravity(
        kind, offsetX: values.first ?? 0, offsetY: values.dropFirst().first ?? 0)
    }
  }

  /// A crop side: pixels, a fraction below 1, or 0 for the whole side.
  static func cropSide(_ name: Substring, _ text: Substring) throws(ParameterError) -> Double {
    guard let value = Double(text), value.isFinite, value >= 0,
      value <= Double(Geometry.maxSide)
    else {
      throw ParameterError("\(name): '\(text)' is not a size (0 to \(Geometry.maxSide))")
    }
    return value
  }

  /// `TOP[:RIGHT[:BOTTOM[:LEFT]]]`, as CSS fills in the missing sides.
  static func padding(
    _ name: Substring, _ arguments: ArraySlice<Substring>
  ) throws(ParameterError) -> Padding {
    guard (1...4).contains(arguments.count) else {
      throw ParameterError("\(name): give 1 to 4 sides")
    }
    var sides: [Int] = []
    for text in arguments {
      guard let value = Int(text), (0...ThumbnailSpec.maxPixelSide).contains(value) else {
        throw ParameterError(
          "\(name): '\(text)' is not a padding (0 to \(ThumbnailSpec.maxPixelSide))")
      }
      sides.append(value)
    }
    let top = sides[0]
    let right = sides.count > 1 ? sides[1] : top
    let bottom = sides.count > 2 ? sides[2] : top
    let left = sides.count > 3 ? sides[3] : right
    return Padding(top: top, right: right, bottom: bottom, left: left)
  }

  /// `R:G:B` or `RRGGBB`; empty for none.
  static func colour(
    _ name: Substring, _ arguments: ArraySlice<Substring>
  ) throws(ParameterError) -> RGBColour? {
    if arguments.isEmpty || (arguments.count == 1 && arguments.first!.isEmpty) { return nil }
    if arguments.count == 3 {
      var channels: [UInt8] = []
      for text in arguments {
        guard let value = UInt8(text) else {
          throw ParameterError("\(name): '\(text)' is not 0 to 255")
        }
        channels.append(value)
      }
      return RGBColour(red: channels[0], green: channels[1], blue: channels[2])
    }
    guard arguments.count == 1, let hex = arguments.first, hex.utf8.count == 6,
      let value = UInt32(hex, radix: 16)
    else { throw ParameterError("\(name): give R:G:B or six hex digits") }
    return RGBColour(
      red: UInt8(value >> 16), green: UInt8(value >> 8 & 255), blue: UInt8(value & 255))
  }
}

extension ThumbnailSpec {
  /// Applies options in imgproxy's path form, separated by `/` (`rs:fill:300:200/g:sm`), as
  /// the HTTP forms read them: the CLI's `--options`. Throws `invalidSpec` naming the
  /// problem; presets cannot be named here.
  public mutating func apply(options text: String) throws(ThumbnailError) {
    var options = ImageOptions()
    (options.width, options.height, options.scale) = (width, height, scale)
    (options.fit, options.format, options.quality) = (fit.rawValue, format.rawValue, quality)
    (options.colour, options.enlarge, options.geometry) = (colour.rawValue, allowUpscale, geometry)
    options.filters = filters
    if let problem = ImgproxyPath.apply(options: text, to: &options, presets: nil) {
      throw .invalidSpec(problem.message)
    }
    guard options.watermark == nil else {
      throw .invalidSpec("wm: watermarks are the daemon's (watermarks), not the CLI's")
    }
    guard let fit = options.fit.flatMap(FitMode.init(rawValue:)),
      let format = options.format.flatMap(OutputFormat.init(rawValue:))
    else { throw .invalidSpec("the options name an unknown fit or format") }
    (width, height, scale, self.fit, self.format) = (
      options.width, options.height, options.scale ?? scale, fit, format
    )
    (quality, allowUpscale, geometry) = (
      options.quality ?? quality, options.enlarge ?? allowUpscale, options.geometry
    )
    filters = options.filters
  }
}
