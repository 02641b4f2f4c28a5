import ImagePipeline
import ThumbClient

/// A client frame, checked: every required field present with the right type. A frame that
/// fails here is a `bad_frame`; a well-formed frame with values out of range (a negative
/// width) is answered with an `invalid_spec` error for its slot instead.
enum ClientRequest {
  case load(Load)
  case cancel(slot: Int, token: Int)
  case prefetch(Prefetch)
  case release(round: Int)
  case priority(slot: Int, token: Int, priority: ImagePriority)

  struct Load {
    let slot: Int
    let item: String
    let token: Int
    let url: String
    let spec: Result<ThumbnailSpec, ParameterError>
    let priority: ImagePriority
  }

  struct Prefetch {
    let round: Int
    let items: [(item: String, url: String)]
    let spec: Result<ThumbnailSpec, ParameterError>
  }

  /// Slot numbers are 0...maxSlot, so one session's slot table stays bounded.
  static let maxSlot = 65_535
  /// Items in one prefetch frame.
  static let maxPrefetchItems = 1024
  static let maxItemLength = 1024
  static let maxURLLength = 8192
  /// Tokens and rounds are 0...2^53 - 1: every such integer survives a JSON client that keeps
  /// numbers as doubles, so what the server echoes is what the client sent.
  static let identifiers = 0...((1 << 53) - 1)

  static func parse(
    _ frame: SessionFrame, parameters: ThumbnailParameters
  ) throws(SessionFrameError) -> ClientRequest {
    let fields = Fields(frame.header)
    switch frame.op {
    case "load":
      let slot = try fields.slot()
      let item = try fields.text("item", maxLength: maxItemLength)
      let token = try fields.integer("token", in: identifiers)
      let url = try fields.text("url", maxLength: maxURLLength)
      let spec = try fields.spec(parameters)
      let priority = try fields.priority(default: .visible)
      return .load(
        Load(slot: slot, item: item, token: token, url: url, spec: spec, priority: priority))
    case "cancel":
      return .cancel(slot: try fields.slot(), token: try fields.integer("token", in: identifiers))
    case "priority":
      return .priority(
        slot: try fields.slot(), token: try fields.integer("token", in: identifiers),
        priority: try fields.priority(default: nil))
    case "prefetch":
      let round = try fields.integer("round", in: identifiers)
      guard case .array(let entries)? = frame.header["items"] else {
        throw SessionFrameError("prefetch needs an items array")
      }
      guard entries.count <= maxPrefetchItems else {
        throw SessionFrameError("at most \(maxPrefetchItems) items per prefetch frame")
      }
      var items: [(item: String, url: String)] = []
      for entry in entries {
        guard case .object(let object) = entry else {
          throw SessionFrameError("each prefetch item must be an object with item and url")
        }
        let entryFields = Fields(object)
        items.append(
          (
            try entryFields.text("item", maxLength: maxItemLength),
            try entryFields.text("url", maxLength: maxURLLength)
          ))
      }
      return .prefetch(Prefetch(round: round, items: items, spec: try fields.spec(parameters)))
    case "release":
      return .release(round: try fields.integer("round", in: identifiers))
    case let op?:
      throw SessionFrameError("unknown op \(JSONValue.string(op).encoded())")
    case nil:
      throw SessionFrameError("the header needs a string op")
    }
  }

  /// Typed access to header fields, throwing `bad_frame` messages that name the field.
  private struct Fields {
    let values: [String: JSONValue]

    init(_ values: [String: JSONValue]) { self.values = values }

    func integer(_ name: String, in range: ClosedRange<Int>) throws(SessionFrameError) -> Int {
      guard let value = values[name] else { throw SessionFrameError("missing field \(name)") }
      guard let number = value.integer, range.contains(number) else {
        throw SessionFrameError(
          "\(name) must be an integer in \(range.lowerBound)...\(range.upperBound)")
      }
      return number
    }

    func optionalInteger(_ name: String) throws(SessionFrameError) -> Int? {
      guard let value = values[name], value != .null else { return nil }
      guard let number = value.integer else {
        throw SessionFrameError("\(name) must be an integer")
      }
      return number
    }

    func text(_ name: String, maxLength: Int) throws(SessionFrameError) -> String {
      guard let value = values[name] else { throw SessionFrameError("missing field \(name)") }
      guard let text = value.string, !text.isEmpty, text.utf8.count <= maxLength else {
        throw SessionFrameError("\(name) must be a string of 1...\(maxLength) bytes")
      }
      return text
    }

    func optionalText(_ name: String) throws(SessionFrameError) -> String? {
      guard let value = values[name], value != .null else { return nil }
      guard let text = value.string else { throw SessionFrameError("\(name) must be a string") }
      return text
    }

    func slot() throws(SessionFrameError) -> Int {
      try integer("slot", in: 0...ClientRequest.maxSlot)
    }

    func priority(default fallback: ImagePriority?) throws(SessionFrameError) -> ImagePriority {
      guard let text = try optionalText("priority") else {
        guard let fallback else { throw SessionFrameError("missing field priority") }
        return fallback
      }
      switch text {
      case "visible": return .visible
      case "normal": return .normal
      case "prefetch": return .prefetch
      default: throw SessionFrameError("priority must be visible, normal or prefetch")
      }
    }

    func spec(
      _ parameters: ThumbnailParameters
    ) throws(SessionFrameError) -> Result<ThumbnailSpec, ParameterError> {
      let width = try integer("w", in: Int.min...Int.max)
      let height = try integer("h", in: Int.min...Int.max)
      var scale: Double?
      if let value = values["scale"], value != .null {
        guard let number = value.number else { throw SessionFrameError("scale must be a number") }
        scale = number
      }
      return parameters.spec(
        width: width, height: height, scale: scale, fit: try optionalText("fit"),
        format: try optionalText("format"), quality: try optionalInteger("quality"))
    }
  }
}
