import ImagePipeline
import ThumbProtocol

/// The thumbnail parameters both front ends accept (`/v1/thumbnail` query and session
/// `load`/`prefetch` frames), checked the same way, with the daemon's defaults filled in.
public struct ThumbnailParameters: Sendable, Hashable {
  /// Output format when the request names none.
  public var defaultFormat: OutputFormat
  /// Quality of the lossy formats when the request names none.
  public var defaultQuality: Int
  /// Whether `auto` may choose AVIF for clients that accept it (`auto_avif`).
  public var avifInAuto: Bool
  /// What the client accepts: `auto` resolves against it (`FormatNegotiation`).
  public var accepted: AcceptedFormats
  /// What becomes of colour profiles when the request does not say.
  public var defaultColour: ColourMode
  /// Named option sets the HTTP forms may use, and whether only they may (`presets_only`).
  public var presets: Presets
  /// Whether (and how far) the HTTP forms take the width and scale from client hints.
  public var clientHints: ClientHints?
  /// The watermarks requests may name (`watermarks`), by name.
  public var watermarks: [String: Watermark] = [:]
  /// Frames an animated source keeps in a WebP or GIF result (`max_animation_frames`).
  public var maxAnimationFrames = 1

  /// Creates the defaults.
  public init(
    defaultFormat: OutputFormat = .auto, defaultQuality: Int = 80, avifInAuto: Bool = false,
    accepted: AcceptedFormats = .basic, defaultColour: ColourMode = .srgb,
    presets: Presets = .none, clientHints: ClientHints? = nil
  ) {
    self.presets = presets
    self.clientHints = clientHints
    self.defaultColour = defaultColour
    self.defaultFormat = defaultFormat
    self.defaultQuality = defaultQuality
    self.avifInAuto = avifInAuto
    self.accepted = accepted
  }

  /// Whether a request naming `format` (nil: none) has its format negotiated: it is `auto`,
  /// named or by default. Such responses vary with `Accept`.
  func negotiates(format: String?) -> Bool {
    (format.flatMap(OutputFormat.init(rawValue:)) ?? (format == nil ? defaultFormat : nil))
      == .auto
  }

  /// The spec a protocol box asks for, checked: its fields, then its imgproxy `options`.
  func spec(_ box: ClientMessage.Box) -> Result<ValidSpec, ParameterError> {
    var options = ImageOptions()
    (options.width, options.height, options.scale) = (box.width, box.height, box.scale)
    (options.fit, options.format, options.quality) = (box.fit, box.format, box.quality)
    options.colour = box.colour
    if let text = box.options,
      let problem = ImgproxyPath.apply(options: text, to: &options, presets: presets)
    {
      return .failure(problem)
    }
    return spec(options)
  }

  /// A checked spec, or the message explaining what is wrong: with the session decoder and
  /// the CLI, the one place a request's spec is checked (`ValidSpec`).
  func spec(
    width: Int, height: Int, scale: Double?, fit: String?, format: String?, quality: Int?,
    colour: String? = nil, enlarge: Bool = false, geometry: Geometry = Geometry(),
    filters: Filters = Filters(), watermark: WatermarkRequest? = nil
  ) -> Result<ValidSpec, ParameterError> {
    let colourMode: ColourMode
    let fitMode: FitMode
    var outputFormat: OutputFormat
    do throws(ParameterError) {
      colourMode = try Self.choice("colour", colour) ?? defaultColour
      fitMode = try Self.choice("fit", fit) ?? .contain
      outputFormat = try Self.choice("format", format) ?? defaultFormat
    } catch {
      return .failure(error)
    }
    outputFormat = FormatNegotiation.resolve(
      outputFormat, accepted: accepted, avifEnabled: avifInAuto)
    var spec = ThumbnailSpec(
      width: width, height: height, scale: scale ?? 1, fit: fitMode, format: outputFormat,
      quality: quality ?? defaultQuality, allowUpscale: enlarge, colour: colourMode)
    spec.geometry = geometry
    spec.filters = filters
    if outputFormat.imageFormat?.animates == true { spec.maxFrames = maxAnimationFrames }
    if let watermark, watermark.opacity > 0 {
      switch placement(watermark) {
      case .success(let placed): spec.watermark = placed
      case .failure(let problem): return .failure(problem)
      }
    }
    do {
      return .success(try ValidSpec(spec))
    } catch {
      return .failure(ParameterError(error.message))
    }
  }
}

extension ThumbnailParameters {
  /// The configured watermark `request` names (`default`, or the only one, when it names
  /// none), placed as it asks.
  func placement(_ request: WatermarkRequest) -> Result<WatermarkPlacement, ParameterError> {
    let image =
      if let name = request.name {
        watermarks[name]
      } else {
        watermarks["default"] ?? (watermarks.count == 1 ? watermarks.values.first : nil)
      }
    guard let image else {
      return .failure(
        ParameterError(
          watermarks.isEmpty
            ? "wm: no watermark is configured (watermarks)"
            : request.name.map { "wm: watermark '\($0.prefix(64))' is not configured" }
              ?? "wm: name a watermark, or configure one called default"))
    }
    return .success(
      WatermarkPlacement(
        image: image, opacity: request.opacity, position: request.position,
        replicate: request.replicate, scale: request.scale))
  }
}

extension ThumbnailParameters {
  /// The case `text` names, nil without one, or the error listing the names.
  fileprivate static func choice<Choice: NamedChoice>(
    _ name: String, _ text: String?
  ) throws(ParameterError) -> Choice? {
    guard let text else { return nil }
    guard let value = Choice(rawValue: text) else {
      throw ParameterError("\(name) must be " + Choice.names)
    }
    return value
  }
}

/// A parameter that is out of range or unknown.
struct ParameterError: Error, Hashable {
  let message: String
  init(_ message: String) { self.message = message }
}
