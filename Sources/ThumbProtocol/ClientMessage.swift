/// A frame a client sends (docs/PROTOCOL.md, "Client frames"), checked: every required field
/// present with its type and within its bounds. A frame that fails here is a `bad_frame`.
/// Box values are carried as sent: a well-formed frame with a negative width or an unknown
/// `fit` is answered `invalid_spec` for its slot by the server, and the session goes on.
public enum ClientMessage: Sendable, Hashable {
  /// Bind `slot` to `item` and `token`, and ask for the thumbnail.
  case load(Load)
  /// Drop the slot's load if it still has `token`.
  case cancel(slot: Int, token: Int)
  /// Change the priority of the slot's load if it still has `token`.
  case priority(slot: Int, token: Int, priority: Priority)
  /// Ask for items about to be shown, as round `round`.
  case prefetch(Prefetch)
  /// Withdraw a prefetch round.
  case release(round: Int)

  /// The thumbnail asked for, as sent: `w`, `h` and the optional `scale`, `fit`, `format`,
  /// `quality`, `colour`.
  public struct Box: Sendable, Hashable {
    /// Box width in points (0 leaves it open).
    public var width: Int
    /// Box height in points (0 leaves it open).
    public var height: Int
    /// Device pixel ratio.
    public var scale: Double?
    /// `contain`, `cover` or `fill` (another value is the server's to refuse).
    public var fit: String?
    /// `auto`, `png`, `jpeg`, `webp` or `avif`.
    public var format: String?
    /// Quality of the lossy formats.
    public var quality: Int?
    /// `srgb` or `keep`: what becomes of the source's colour profile.
    public var colour: String?
    /// Processing options in imgproxy's path form, `/`-separated (`g:sm/rot:90`): gravity,
    /// crop, rotation and the rest (docs/PROTOCOL.md, "Geometry and filters").
    public var options: String?

    /// A box with raw values, as a frame carries them (nil: not sent).
    public init(
      width: Int, height: Int, scale: Double?, fit: String?, format: String?, quality: Int?,
      colour: String? = nil, options: String? = nil
    ) {
      (self.width, self.height, self.scale) = (width, height, scale)
      (self.fit, self.format, self.quality, self.colour) = (fit, format, quality, colour)
      self.options = options
    }

    /// A box from the protocol's own vocabulary.
    public init(
      width: Int, height: Int, scale: Double = 1, fit: Fit = .contain, format: Format? = nil,
      quality: Int? = nil, colour: String? = nil, options: String? = nil
    ) {
      self.init(
        width: width, height: height, scale: Optional(scale), fit: Optional(fit.rawValue),
        format: format?.rawValue, quality: quality, colour: colour, options: options)
    }
  }

  /// A `load` frame.
  public struct Load: Sendable, Hashable {
    /// 0...`Wire.maxSlot`.
    public var slot: Int
    /// Opaque to the server, echoed back.
    public var item: String
    /// The client's: differs between successive loads of a slot.
    public var token: Int
    /// The source.
    public var url: String
    /// The thumbnail.
    public var box: Box
    /// Default `visible`.
    public var priority: Priority
    /// The content revision the client's model holds, if it knows one: part of the cache
    /// key, echoed in the image.
    public var rev: String?
    /// Whether a `preview` frame may come ahead of the image, when the source carries an
    /// early picture (a JPEG's EXIF thumbnail or first DC scans, a HEIF's thumbnail).
    public var preview: Bool

    /// A load.
    public init(
      slot: Int, item: String, token: Int, url: String, box: Box, priority: Priority = .visible,
      rev: String? = nil, preview: Bool = false
    ) {
      (self.slot, self.item, self.token, self.url) = (slot, item, token, url)
      (self.box, self.priority, self.rev, self.preview) = (box, priority, rev, preview)
    }
  }

  /// One announced item of a `prefetch` frame.
  public struct PrefetchItem: Sendable, Hashable {
    /// Opaque, echoed back.
    public var item: String
    /// The source.
    public var url: String
    /// The content revision, as in `Load.rev`.
    public var rev: String?

    /// An item.
    public init(item: String, url: String, rev: String? = nil) {
      (self.item, self.url, self.rev) = (item, url, rev)
    }
  }

  /// A `prefetch` frame.
  public struct Prefetch: Sendable, Hashable {
    /// The round's number.
    public var round: Int
    /// At most `Wire.maxPrefetchItems`, nearest first.
    public var items: [PrefetchItem]
    /// One box for all of them.
    public var box: Box

    /// A prefetch round.
    public init(round: Int, items: [PrefetchItem], box: Box) {
      (self.round, self.items, self.box) = (round, items, box)
    }
  }

  /// Reads a client frame. A header without a string `op` breaks the framing; any other rule
  /// broken throws an error whose `refused` names the message as far as it reads (its op,
  /// slot, item, token, round), for an answer where it points.
  public init(frame: SessionFrame) throws(SessionFrameError) {
    guard let op = frame.op else { throw SessionFrameError("the header needs a string op") }
    let fields = FrameFields(frame.header)
    do {
      self = try Self(op: op, fields)
    } catch {
      throw SessionFrameError(error.message, refused: RefusedMessage(op: op, fields.values))
    }
  }

  private init(op: String, _ fields: FrameFields) throws(SessionFrameError) {
    switch Wire.Op(rawValue: op) {
    case .load:
      self = .load(
        Load(
          slot: try fields.slot(), item: try fields.text("item", maxLength: Wire.maxItemLength),
          token: try fields.integer("token", in: Wire.identifiers),
          url: try fields.text("url", maxLength: Wire.maxURLLength), box: try fields.box(),
          priority: try fields.priority() ?? .visible, rev: try fields.revision(),
          preview: try fields.flag("preview")))
    case .cancel:
      self = .cancel(
        slot: try fields.slot(), token: try fields.integer("token", in: Wire.identifiers))
    case .priority:
      let (slot, token) = (try fields.slot(), try fields.integer("token", in: Wire.identifiers))
      guard let priority = try fields.priority() else {
        throw SessionFrameError("missing field priority")
      }
      self = .priority(slot: slot, token: token, priority: priority)
    case .prefetch:
      let round = try fields.integer("round", in: Wire.identifiers)
      self = .prefetch(Prefetch(round: round, items: try fields.items(), box: try fields.box()))
    case .release:
      self = .release(round: try fields.integer("round", in: Wire.identifiers))
    case .image, .error, .prefetched, .prefetchError, .placeholder, .preview, nil:
      throw SessionFrameError("unknown op \(JSONValue.string(op).encoded())")
    }
  }

  /// The frame to send.
  public var frame: SessionFrame {
    var header: [String: JSONValue]
    switch self {
    case .load(let load):
      header = [
        "slot": .integer(load.slot), "item": .string(load.item), "token": .integer(load.token),
        "url": .string(load.url), "priority": .string(load.priority.rawValue),
      ]
      if let rev = load.rev { header["rev"] = .string(rev) }
      if load.preview { header["preview"] = .bool(true) }
      load.box.write(into: &header)
    case .cancel(let slot, let token):
      header = ["slot": .integer(slot), "token": .integer(token)]
    case .priority(let slot, let token, let priority):
      header = [
        "slot": .integer(slot), "token": .integer(token), "priority": .string(priority.rawValue),
      ]
    case .prefetch(let prefetch):
      header = [
        "round": .integer(prefetch.round),
        "items": .array(
          prefetch.items.map { item in
            var fields: [String: JSONValue] = [
              "item": .string(item.item), "url": .string(item.url),
            ]
            if let rev = item.rev { fields["rev"] = .string(rev) }
            return .object(fields)
          }),
      ]
      prefetch.box.write(into: &header)
    case .release(let round):
      header = ["round": .integer(round)]
    }
    header["op"] = .string(op.rawValue)
    return SessionFrame(header: header)
  }

  /// This message's `op`.
  public var op: Wire.Op {
    switch self {
    case .load: .load
    case .cancel: .cancel
    case .priority: .priority
    case .prefetch: .prefetch
    case .release: .release
    }
  }
}

/// A client message that broke a rule, as far as it reads: where its answer goes. A `load`,
/// `cancel` or `priority` with a readable `slot` is answered with an `error` for that slot (and
/// its `item` and `token`, when they read); anything else with an `error` that names no slot.
public struct RefusedMessage: Sendable, Hashable {
  /// The message's `op`, as sent.
  public var op: String
  /// Its `slot`, when it is an integer in bounds and the op addresses slots.
  public var slot: Int?
  /// Its `item`, when it is a string in bounds.
  public var item: String?
  /// Its `token`, when it is an integer in bounds.
  public var token: Int?
  /// Its `round`, when it is an integer in bounds and the op addresses rounds.
  public var round: Int?

  /// A refusal with these parts.
  public init(
    op: String, slot: Int? = nil, item: String? = nil, token: Int? = nil, round: Int? = nil
  ) {
    (self.op, self.slot, self.item, self.token, self.round) = (op, slot, item, token, round)
  }

  /// What can be read of a message's header `values`, each field only when valid.
  init(op: String, _ values: [String: JSONValue]) {
    func integer(_ name: String, in range: ClosedRange<Int>) -> Int? {
      values[name]?.integer.flatMap { range.contains($0) ? $0 : nil }
    }
    let kind = Wire.Op(rawValue: op)
    let addressesSlot = kind == .load || kind == .cancel || kind == .priority
    let addressesRound = kind == .prefetch || kind == .release
    self.init(
      op: op, slot: addressesSlot ? integer("slot", in: 0...Wire.maxSlot) : nil,
      item: addressesSlot
        ? values["item"]?.string.flatMap {
          $0.isEmpty || $0.utf8.count > Wire.maxItemLength ? nil : $0
        } : nil,
      token: addressesSlot ? integer("token", in: Wire.identifiers) : nil,
      round: addressesRound ? integer("round", in: Wire.identifiers) : nil)
  }

  /// The error frame that answers it, with `message`: for its slot when it names one.
  public func reply(_ message: String) -> ServerMessage {
    var text = message
    if slot == nil, let round { text = "\(op) round \(round): " + message }
    return .error(slot: slot, item: item, token: token, code: Wire.Code.badMessage, message: text)
  }
}

extension ClientMessage.Box {
  fileprivate func write(into header: inout [String: JSONValue]) {
    header["w"] = .integer(width)
    header["h"] = .integer(height)
    if let scale { header["scale"] = .wholeOrNumber(scale) }
    if let fit { header["fit"] = .string(fit) }
    if let format { header["format"] = .string(format) }
    if let quality { header["quality"] = .integer(quality) }
    if let colour { header["colour"] = .string(colour) }
    if let options { header["options"] = .string(options) }
  }
}

/// Typed access to a client frame's fields, throwing `bad_frame` messages that name the field.
private struct FrameFields {
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
    guard let number = value.integer else { throw SessionFrameError("\(name) must be an integer") }
    return number
  }

  func text(_ name: String, maxLength: Int) throws(SessionFrameError) -> String {
    guard let value = values[name] else { throw SessionFrameError("missing field \(name)") }
    guard let text = value.string, !text.isEmpty, text.utf8.count <= maxLength else {
      throw SessionFrameError("\(name) must be a string of 1...\(maxLength) bytes")
    }
    return text
  }

  /// An optional boolean, false when absent or null.
  func flag(_ name: String) throws(SessionFrameError) -> Bool {
    guard let value = values[name], value != .null else { return false }
    guard case .bool(let flag) = value else {
      throw SessionFrameError("\(name) must be true or false")
    }
    return flag
  }

  func optionalText(_ name: String) throws(SessionFrameError) -> String? {
    guard let value = values[name], value != .null else { return nil }
    guard let text = value.string else { throw SessionFrameError("\(name) must be a string") }
    return text
  }

  /// An optional `rev` of 1...`Wire.maxRevisionLength` bytes.
  func revision() throws(SessionFrameError) -> String? {
    guard values["rev"] != nil, values["rev"] != .null else { return nil }
    return try text("rev", maxLength: Wire.maxRevisionLength)
  }

  func slot() throws(SessionFrameError) -> Int { try integer("slot", in: 0...Wire.maxSlot) }

  func priority() throws(SessionFrameError) -> Priority? {
    guard let text = try optionalText("priority") else { return nil }
    guard let priority = Priority(rawValue: text) else {
      throw SessionFrameError("priority must be visible, normal or prefetch")
    }
    return priority
  }

  func box() throws(SessionFrameError) -> ClientMessage.Box {
    let width = try integer("w", in: Int.min...Int.max)
    let height = try integer("h", in: Int.min...Int.max)
    var scale: Double?
    if let value = values["scale"], value != .null {
      guard let number = value.number else { throw SessionFrameError("scale must be a number") }
      scale = number
    }
    return ClientMessage.Box(
      width: width, height: height, scale: scale, fit: try optionalText("fit"),
      format: try optionalText("format"), quality: try optionalInteger("quality"),
      colour: try optionalText("colour"), options: try optionalText("options"))
  }

  func items() throws(SessionFrameError) -> [ClientMessage.PrefetchItem] {
    guard case .array(let entries)? = values["items"] else {
      throw SessionFrameError("prefetch needs an items array")
    }
    guard entries.count <= Wire.maxPrefetchItems else {
      throw SessionFrameError("at most \(Wire.maxPrefetchItems) items per prefetch frame")
    }
    var items: [ClientMessage.PrefetchItem] = []
    for entry in entries {
      guard case .object(let object) = entry else {
        throw SessionFrameError("each prefetch item must be an object with item and url")
      }
      let fields = FrameFields(object)
      items.append(
        ClientMessage.PrefetchItem(
          item: try fields.text("item", maxLength: Wire.maxItemLength),
          url: try fields.text("url", maxLength: Wire.maxURLLength), rev: try fields.revision()))
    }
    return items
  }
}
