import ImagePipeline

/// What a request asks of the image, in either HTTP form (the `/v1/thumbnail` query or an
/// imgproxy path), before the daemon's defaults fill in the rest: the one shape that presets
/// (`Presets`) and client hints (`ClientHints`) are applied to, and that
/// `ThumbnailParameters.spec(_:)` checks.
struct ImageOptions: Sendable, Hashable {
  /// Box width in points; 0 leaves it to the height (or to the source).
  var width = 0
  /// Box height in points; 0 leaves it to the width.
  var height = 0
  /// Device pixel ratio; nil for the default (1, or a client hint).
  var scale: Double?
  /// `contain`, `cover` or `fill`; nil for the default.
  var fit: String?
  /// An output format name; nil for the default.
  var format: String?
  /// Lossy quality; nil for the default.
  var quality: Int?
  /// `srgb` or `keep`; nil for the default.
  var colour: String?
  /// Whether the result may be larger than its source; nil for the default (no).
  var enlarge: Bool?
  /// Crop, gravity, rotation, mirroring, extending, padding and background.
  var geometry = Geometry()
  /// Blur, sharpening and pixelation.
  var filters = Filters()
  /// A watermark, by name (resolved against the configured ones when the spec is made).
  var watermark: WatermarkRequest?
}

/// `wm:OPACITY:POSITION:X:Y:SCALE[:NAME]` as read: the watermark by its configured name (nil:
/// the default one).
struct WatermarkRequest: Sendable, Hashable {
  var name: String?
  var opacity: Double
  var position = Gravity.centre
  var replicate = false
  var scale: Double = 0
}

extension ThumbnailParameters {
  /// The spec `options` asks for, checked, with these defaults.
  func spec(_ options: ImageOptions) -> Result<ValidSpec, ParameterError> {
    spec(
      width: options.width, height: options.height, scale: options.scale, fit: options.fit,
      format: options.format, quality: options.quality, colour: options.colour,
      enlarge: options.enlarge ?? false, geometry: options.geometry, filters: options.filters,
      watermark: options.watermark)
  }
}

extension ThumbnailParameters {
  /// The spec an HTTP request's `options` ask for: client hints fill what the options leave
  /// open, and an `auto` format is negotiated from `Accept`. Also the request headers the
  /// answer varies on (`Vary`), consulted or not.
  func spec(
    _ options: ImageOptions, of request: HTTPRequest
  ) -> Result<(spec: ValidSpec, varies: [String]), ParameterError> {
    var options = options
    var parameters = self
    var varies: [String] = []
    if negotiates(format: options.format) {
      parameters.accepted = AcceptedFormats(acceptOf: request)
      varies.append("Accept")
    }
    if let clientHints { varies += clientHints.apply(to: &options, from: request) }
    return parameters.spec(options).map { ($0, varies) }
  }
}
