/// A frame the server sends (docs/PROTOCOL.md, "Server frames").
public enum ServerMessage: Sendable, Hashable {
  /// A thumbnail for a slot's current load.
  case image(Image)
  /// A load failed; `slot`, `item` and `token` are nil for a connection-level error such as
  /// `bad_frame` (after which the server closes the connection).
  case error(slot: Int?, item: String?, token: Int?, code: String, message: String)
  /// A prefetched item is now cached.
  case prefetched(round: Int, item: String)
  /// A prefetched item failed.
  case prefetchError(round: Int, item: String, code: String)
  /// A slot's current load's rough look, before its image (never after it).
  case placeholder(Placeholder)
  /// A small early picture of a slot's current load, before its image (never after it), for
  /// a load that asked (`preview`). `cache` is empty; the format is `jpeg`, or `png` when
  /// transparent.
  case preview(Image)

  /// A placeholder frame's contents: no body, all in the header.
  public struct Placeholder: Sendable, Hashable {
    /// The slot it is for.
    public var slot: Int
    /// The item the slot holds.
    public var item: String
    /// The token of the load.
    public var token: Int
    /// The load's `rev`, when it had one.
    public var rev: String?
    /// The ThumbHash (at most 25 bytes; Base64 on the wire).
    public var thumbHash: [UInt8]
    /// The dominant colour, `#rrggbb`.
    public var colour: String
    /// The width the final image will have, in pixels.
    public var width: Int
    /// The height the final image will have, in pixels.
    public var height: Int

    /// A placeholder frame's contents.
    public init(
      slot: Int, item: String, token: Int, rev: String? = nil, thumbHash: [UInt8],
      colour: String, width: Int, height: Int
    ) {
      (self.slot, self.item, self.token, self.rev) = (slot, item, token, rev)
      (self.thumbHash, self.colour, self.width, self.height) = (thumbHash, colour, width, height)
    }
  }

  /// A delivered thumbnail.
  public struct Image: Sendable, Hashable {
    /// The slot it was loaded into.
    public var slot: Int
    /// The item the slot held.
    public var item: String
    /// The token of the load.
    public var token: Int
    /// `png`, `jpeg`, `webp` or `avif`.
    public var format: String
    /// Width in pixels.
    public var width: Int
    /// Height in pixels.
    public var height: Int
    /// `memory`, `disk`, `miss`, `coalesced`, `revalidated` or `stale`.
    public var cache: String
    /// The encoded image.
    public var data: [UInt8]
    /// The load's `rev`, when it had one.
    public var rev: String?

    /// An image frame's contents.
    public init(
      slot: Int, item: String, token: Int, format: String, width: Int, height: Int,
      cache: String, data: [UInt8], rev: String? = nil
    ) {
      (self.slot, self.item, self.token, self.format) = (slot, item, token, format)
      (self.width, self.height, self.cache, self.data) = (width, height, cache, data)
      self.rev = rev
    }
  }

  /// Reads a server frame; nil for an op this side does not know (later versions may add
  /// some) or an image without its slot, item and token.
  public init?(frame: SessionFrame) {
    let header = frame.header
    switch frame.op.flatMap(Wire.Op.init(rawValue:)) {
    case .image, .preview:
      guard let slot = header["slot"]?.integer, let item = header["item"]?.string,
        let token = header["token"]?.integer
      else { return nil }
      let image = Image(
        slot: slot, item: item, token: token, format: header["format"]?.string ?? "",
        width: header["width"]?.integer ?? 0, height: header["height"]?.integer ?? 0,
        cache: header["cache"]?.string ?? "", data: frame.body, rev: header["rev"]?.string)
      self = frame.op == Wire.Op.preview.rawValue ? .preview(image) : .image(image)
    case .error:
      self = .error(
        slot: header["slot"]?.integer, item: header["item"]?.string,
        token: header["token"]?.integer, code: header["code"]?.string ?? "",
        message: header["message"]?.string ?? "")
    case .prefetched:
      guard let round = header["round"]?.integer, let item = header["item"]?.string else {
        return nil
      }
      self = .prefetched(round: round, item: item)
    case .prefetchError:
      guard let round = header["round"]?.integer, let item = header["item"]?.string else {
        return nil
      }
      self = .prefetchError(round: round, item: item, code: header["code"]?.string ?? "")
    case .placeholder:
      guard let slot = header["slot"]?.integer, let item = header["item"]?.string,
        let token = header["token"]?.integer,
        let hash = header["thumbhash"]?.string.flatMap(Base64.decodeStandard)
      else { return nil }
      self = .placeholder(
        Placeholder(
          slot: slot, item: item, token: token, rev: header["rev"]?.string, thumbHash: hash,
          colour: header["colour"]?.string ?? "", width: header["width"]?.integer ?? 0,
          height: header["height"]?.integer ?? 0))
    case .load, .cancel, .priority, .prefetch, .release, nil:
      return nil
    }
  }

  /// The frame to send.
  public var frame: SessionFrame {
    switch self {
    case .image(let image), .preview(let image):
      let isPreview = if case .preview = self { true } else { false }
      var header: [String: JSONValue] = [
        "op": .string((isPreview ? Wire.Op.preview : Wire.Op.image).rawValue),
        "slot": .integer(image.slot), "item": .string(image.item),
        "token": .integer(image.token), "format": .string(image.format),
        "width": .integer(image.width), "height": .integer(image.height),
      ]
      if !isPreview { header["cache"] = .string(image.cache) }
      if let rev = image.rev { header["rev"] = .string(rev) }
      return SessionFrame(header: header, body: image.data)
    case .error(let slot, let item, let token, let code, let message):
      var header: [String: JSONValue] = [
        "op": .string(Wire.Op.error.rawValue), "code": .string(code),
        "message": .string(message),
      ]
      if let slot { header["slot"] = .integer(slot) }
      if let item { header["item"] = .string(item) }
      if let token { header["token"] = .integer(token) }
      return SessionFrame(header: header)
    case .prefetched(let round, let item):
      return SessionFrame(header: [
        "op": .string(Wire.Op.prefetched.rawValue), "round": .integer(round),
        "item": .string(item),
      ])
    case .prefetchError(let round, let item, let code):
      return SessionFrame(header: [
        "op": .string(Wire.Op.prefetchError.rawValue), "round": .integer(round),
        "item": .string(item), "code": .string(code),
      ])
    case .placeholder(let placeholder):
      var header: [String: JSONValue] = [
        "op": .string(Wire.Op.placeholder.rawValue), "slot": .integer(placeholder.slot),
        "item": .string(placeholder.item), "token": .integer(placeholder.token),
        "thumbhash": .string(Base64.standard(placeholder.thumbHash)),
        "colour": .string(placeholder.colour), "width": .integer(placeholder.width),
        "height": .integer(placeholder.height),
      ]
      if let rev = placeholder.rev { header["rev"] = .string(rev) }
      return SessionFrame(header: header)
    }
  }

  /// The connection-level `bad_frame` error the server sends before it closes.
  public static func badFrame(_ error: SessionFrameError) -> ServerMessage {
    .error(slot: nil, item: nil, token: nil, code: Wire.Code.badFrame, message: error.message)
  }
}
