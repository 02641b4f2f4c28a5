import ImagePipeline
import ThumbProtocol

/// imgproxy's path form, read as thumbd serves it: `/<signature>/<options>/plain/<percent-encoded
/// source>[@<ext>]` or `/<signature>/<options>/<base64url source>[.<ext>]`, so its client
/// libraries and a site's existing URLs keep working (docs/PROTOCOL.md, "imgproxy paths").
///
/// Options thumbd does the same with are taken; any other is refused naming it, never served
/// as a silently different image. Pure: the route checks the signature over `signed` first.
struct ImgproxyPath: Sendable, Hashable {
  /// The first segment.
  let signature: Substring
  /// Everything after it, from its `/`, as received: what the signature covers.
  let signed: Substring

  /// Splits a request target into signature and signed part; nil when it is not in the path
  /// form: the segment after the signature must be an option (`name:args`) or `plain`, so an
  /// unknown path such as `/nope/1` stays a 404. In presets-only mode that segment is a list of
  /// preset names, so any target of three segments or more qualifies.
  init?(target: String, presetsOnly: Bool = false) {
    let body = target.dropFirst()
    guard target.hasPrefix("/"), let slash = body.firstIndex(of: "/"), slash > body.startIndex
    else { return nil }
    let rest = body[body.index(after: slash)...]
    let next = rest.prefix { $0 != "/" }
    guard next.contains(":") || next == "plain" || (presetsOnly && next.count < rest.count)
    else { return nil }
    signature = body[..<slash]
    signed = body[slash...]
  }

  /// What the options and source ask for.
  @dynamicMemberLookup
  struct Request: Sendable, Hashable {
    var source = ""
    var options = ImageOptions()

    subscript<Value>(dynamicMember path: WritableKeyPath<ImageOptions, Value>) -> Value {
      get { options[keyPath: path] }
      set { options[keyPath: path] = newValue }
    }
  }

  /// The options and source of the signed part, or what is wrong with them. `presets` names
  /// the sets `pr:NAME` may use; its `default` applies first, and in presets-only mode the
  /// options are one segment of preset names (`/SIGNATURE/thumb:webp/plain/...`), as imgproxy
  /// reads them.
  func parse(presets: Presets = .none) -> Result<Request, ParameterError> {
    var request = Request()
    presets.applyDefault(to: &request.options)
    var segments = signed.dropFirst().split(separator: "/", omittingEmptySubsequences: false)[...]
    if presets.only {
      guard let names = segments.popFirst(), segments.count > 0 else {
        return .failure(ParameterError("the source is missing"))
      }
      if let problem = presets.apply(names: names, to: &request.options) {
        return .failure(problem)
      }
    } else {
      // Options are the segments with a ':'; the source starts at the first without one.
      var count = 0
      while let segment = segments.first, segment.contains(":") {
        segments.removeFirst()
        count += 1
        guard count <= Self.maxOptions else {
          return .failure(ParameterError("at most \(Self.maxOptions) options in a path"))
        }
        if let problem = Self.apply(segment, to: &request.options, presets: presets) {
          return .failure(problem)
        }
      }
    }
    guard !segments.isEmpty else { return .failure(ParameterError("the source is missing")) }
    var extensionName: Substring?
    if segments.first == "plain" {
      var encoded = segments.dropFirst().joined(separator: "/")[...]
      if let at = encoded.lastIndex(of: "@") {
        extensionName = encoded[encoded.index(after: at)...]
        encoded = encoded[..<at]
      }
      guard let source = HTTPRequestParser.percentDecode(encoded, plusIsSpace: false) else {
        return .failure(ParameterError("the plain source is not valid percent-encoding"))
      }
      request.source = source
    } else {
      var encoded = segments.joined()[...]
      if let dot = encoded.lastIndex(of: ".") {
        extensionName = encoded[encoded.index(after: dot)...]
        encoded = encoded[..<dot]
      }
      guard let bytes = Base64.decodeURLSafe(encoded),
        let source = String(validating: bytes, as: UTF8.self)
      else { return .failure(ParameterError("the source is not URL-safe Base64")) }
      request.source = source
    }
    guard !request.source.isEmpty else { return .failure(ParameterError("the source is empty")) }
    if let extensionName, !extensionName.isEmpty {
      guard let format = Self.format(extensionName) else {
        return .failure(ParameterError("extension '\(extensionName)' is not supported"))
      }
      request.format = format
    }
    return .success(request)
  }

  /// The most options one path (or one session box) may name.
  static let maxOptions = 64

  /// Applies `text`, options in the path form separated by `/` (a session box's `options`,
  /// the CLI's `--options`); the problem when one cannot be served as asked.
  static func apply(
    options text: String, to request: inout ImageOptions, presets: Presets?
  ) -> ParameterError? {
    let segments = text.split(separator: "/")
    guard segments.count <= maxOptions else {
      return ParameterError("at most \(maxOptions) options")
    }
    for segment in segments {
      guard segment.contains(":") else {
        return ParameterError("'\(segment)' is not an option (name:arguments)")
      }
      if let problem = apply(segment, to: &request, presets: presets) { return problem }
    }
    return nil
  }

  /// thumbd's name of an imgproxy format or extension.
  static func format(_ name: Substring) -> String? {
    switch name.lowercased() {
    case "jpg", "jpeg": "jpeg"
    default: OutputFormat(rawValue: name.lowercased()).flatMap { $0 == .auto ? nil : $0.rawValue }
    }
  }

  /// Applies one `name:arg:arg` option; the problem when it cannot be served as asked.
  /// `pr:NAME[:NAME...]` applies presets from `presets` (nil: presets may not be named, as
  /// inside a preset's own definition).
  static func apply(
    _ segment: Substring, to request: inout ImageOptions, presets: Presets?
  ) -> ParameterError? {
    let parts = segment.split(separator: ":", omittingEmptySubsequences: false)
    let name = parts[0]
    let arguments = Array(parts.dropFirst())
    func argument(_ index: Int) -> Substring? {
      index < arguments.count && !arguments[index].isEmpty ? arguments[index] : nil
    }
    func integer(_ index: Int, into target: inout Int) -> ParameterError? {
      guard let text = argument(index) else { return nil }
      guard let value = Int(text), value >= 0 else {
        return ParameterError("\(name): '\(text)' is not a size")
      }
      target = value
      return nil
    }
    /// The enlarge and extend arguments of `rs` and `s`, from `index` on.
    func enlargeAndExtend(_ index: Int) -> ParameterError? {
      do throws(ParameterError) {
        if let text = argument(index) {
          request.enlarge = try GeometryOptions.flag(name, text)
        }
        if argument(index + 1) != nil {
          try GeometryOptions.extend(name, arguments[(index + 1)...], into: &request)
        }
        return nil
      } catch {
        return error
      }
    }
    switch name {
    case "rs", "resize":
      if let text = argument(0), let problem = resizingType(text, into: &request) {
        return problem
      }
      return integer(1, into: &request.width) ?? integer(2, into: &request.height)
        ?? enlargeAndExtend(3)
    case "s", "size":
      return integer(0, into: &request.width) ?? integer(1, into: &request.height)
        ?? enlargeAndExtend(2)
    case "rt", "resizing_type":
      return argument(0).flatMap { resizingType($0, into: &request) }
    case "w", "width": return integer(0, into: &request.width)
    case "h", "height": return integer(0, into: &request.height)
    case "ar", "auto_rotate":
      // thumbd always applies the EXIF orientation.
      guard let text = argument(0), (try? GeometryOptions.flag(name, text)) == true else {
        return ParameterError("auto_rotate:0 (ignoring the EXIF orientation) is not supported")
      }
      return nil
    case "dpr":
      guard let text = argument(0), let value = Double(text), value > 0 else {
        return ParameterError("dpr must be a positive number")
      }
      request.scale = value
      return nil
    case "q", "quality":
      guard let text = argument(0), let value = Int(text) else {
        return ParameterError("quality must be an integer")
      }
      // imgproxy's 0 is its default quality.
      request.quality = value == 0 ? nil : value
      return nil
    case "f", "format", "ext":
      guard let text = argument(0), let format = format(text) else {
        return ParameterError("format '\(argument(0) ?? "")' is not supported")
      }
      request.format = format
      return nil
    case "pr", "preset":
      guard let presets else { return ParameterError("a preset cannot name presets") }
      guard !arguments.isEmpty else { return ParameterError("pr: name a preset") }
      return presets.apply(names: segment.dropFirst(name.count + 1), to: &request)
    default:
      guard GeometryOptions.names.contains(name) else {
        return ParameterError("option '\(name)' is not supported")
      }
      return GeometryOptions.apply(name, arguments[...], to: &request)
    }
  }

  /// imgproxy's resizing types as thumbd's fits: fit is contain, fill and fill-down are
  /// cover, force is fill, auto is auto.
  private static func resizingType(_ name: Substring, into request: inout ImageOptions)
    -> ParameterError?
  {
    switch name {
    case "fit": request.fit = "contain"
    case "fill", "fill-down": request.fit = "cover"
    case "force": request.fit = "fill"
    case "auto": request.fit = "auto"
    default: return ParameterError("resizing type '\(name)' is not supported")
    }
    return nil
  }
}
