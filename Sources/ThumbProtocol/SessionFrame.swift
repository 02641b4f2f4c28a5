/// One frame of the thumbd session protocol: a JSON object on one line, and the `bytes` bytes
/// of body that follow it when the header has a `bytes` field (docs/PROTOCOL.md).
public struct SessionFrame: Sendable, Hashable {
  /// The header's fields, as JSON values.
  public var header: [String: JSONValue]
  /// The body (empty when the header has no `bytes`).
  public var body: [UInt8]

  /// Creates a frame.
  public init(header: [String: JSONValue], body: [UInt8] = []) {
    self.header = header
    self.body = body
  }

  /// The header's `op`.
  public var op: String? { header["op"]?.string }

  /// The frame as bytes: the header (with `bytes` set when there is a body), `\n`, the body.
  public func serialized() -> [UInt8] {
    var fields = header
    if !body.isEmpty { fields["bytes"] = .integer(body.count) }
    var line = Array(JSONValue.object(fields).encoded().utf8)
    line.append(UInt8(ascii: "\n"))
    return line + body
  }
}

/// Why bytes are not a valid frame, or a frame not a valid message. A frame that is no message
/// at all (not a JSON object, no string `op`, a bad `bytes`, ...) breaks the framing: the
/// receiver answers `bad_frame` and closes. A message whose fields break a rule is `refused`:
/// the server answers it `bad_message` where it points (its slot, its round) and the session
/// goes on.
public struct SessionFrameError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What is wrong, for the `message` of the error frame.
  public var message: String
  /// The message it was, as far as it could be read; nil for a framing error.
  public var refused: RefusedMessage?

  /// Creates an error; `refused` names the message it was, nil for a framing error.
  public init(_ message: String, refused: RefusedMessage? = nil) {
    self.message = message
    self.refused = refused
  }

  /// Whether the connection must close: the bytes are no message (docs/PROTOCOL.md, rule 8).
  public var breaksFraming: Bool { refused == nil }

  /// The message.
  public var description: String { message }
}

/// Splits a byte stream into frames, incrementally: bytes in, complete frames out.
public struct SessionFrameReader: Sendable {
  /// Longest header line, newline included.
  public let maxHeaderBytes: Int
  /// Largest body accepted.
  public let maxBodyBytes: Int
  private var buffer: [UInt8] = []
  private var start = 0
  private var pendingHeader: [String: JSONValue]?
  private var pendingBody = 0

  /// The longest header line the protocol allows (docs/PROTOCOL.md), newline included.
  public static let headerLimit = Wire.headerLimit

  /// Creates a reader. Headers are at most `headerLimit` by the protocol; `maxBodyBytes`
  /// depends on the side (a server takes no large bodies; a client takes thumbnails).
  public init(maxHeaderBytes: Int = SessionFrameReader.headerLimit, maxBodyBytes: Int) {
    self.maxHeaderBytes = maxHeaderBytes
    self.maxBodyBytes = maxBodyBytes
  }

  /// Bytes received but not yet part of a complete frame.
  public var bufferedBytes: Int { buffer.count - start }

  /// Adds bytes and returns the frames they complete, in order.
  public mutating func feed(_ bytes: some Collection<UInt8>) throws(SessionFrameError)
    -> [SessionFrame]
  {
    buffer.append(contentsOf: bytes)
    var frames: [SessionFrame] = []
    while let frame = try next() { frames.append(frame) }
    // Drop consumed bytes in one move, not per frame.
    if start > 0 {
      buffer.removeFirst(start)
      start = 0
    }
    return frames
  }

  private mutating func next() throws(SessionFrameError) -> SessionFrame? {
    if let header = pendingHeader {
      guard buffer.count - start >= pendingBody else { return nil }
      let body = Array(buffer[start..<start + pendingBody])
      start += pendingBody
      pendingHeader = nil
      return SessionFrame(header: header, body: body)
    }
    let searchEnd = min(buffer.count, start + maxHeaderBytes)
    guard let newline = buffer[start..<searchEnd].firstIndex(of: UInt8(ascii: "\n")) else {
      if buffer.count - start >= maxHeaderBytes {
        throw SessionFrameError("header line longer than \(maxHeaderBytes) bytes")
      }
      return nil
    }
    let line = buffer[start..<newline]
    start = newline + 1
    guard String(validating: line, as: UTF8.self) != nil else {
      throw SessionFrameError("header is not UTF-8")
    }
    guard !line.starts(with: [0xEF, 0xBB, 0xBF]) else {
      // JSON on the wire carries no byte order mark (RFC 8259, section 8.1).
      throw SessionFrameError("header starts with a byte order mark")
    }
    guard case .object(let header)? = JSONValue.parse(line) else {
      throw SessionFrameError("header is not a JSON object")
    }
    guard let bytes = header["bytes"] else { return SessionFrame(header: header) }
    guard let count = bytes.integer, count >= 0 else {
      throw SessionFrameError("bytes must be a non-negative integer")
    }
    guard count <= maxBodyBytes else {
      throw SessionFrameError("body of \(count) bytes is over the limit of \(maxBodyBytes)")
    }
    pendingHeader = header
    pendingBody = count
    return try next()
  }
}
