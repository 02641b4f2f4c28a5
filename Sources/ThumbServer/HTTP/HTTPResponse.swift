import ThumbProtocol

/// An HTTP/1.1 response ready to be written.
public struct HTTPResponse: Sendable, Hashable {
  /// The status code.
  public var status: Int
  /// Header fields in order (Content-Length is added when serialised).
  public var headers: [(name: String, value: String)]
  /// The body; empty for 304 and HEAD.
  public var body: [UInt8]
  /// The error kind of an error response (`error(_:kind:message:)`), for the access log.
  public var errorKind: String?
  /// How this response may answer a later request for the same target with the same headers
  /// (`ReadyResponses`); nil when it may not (it is made afresh every time).
  public var reuse: ResponseReuse?

  /// Creates a response.
  public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
    self.status = status
    self.headers = headers
    self.body = body
  }

  /// The image format of a thumbnail response (`jpeg`, `png`, `webp`, `avif`), from its
  /// Content-Type; nil for anything else.
  public var imageFormat: String? {
    guard let type = header("content-type"), type.hasPrefix("image/") else { return nil }
    return String(type.dropFirst(6))
  }

  /// The first value of a header, by case-insensitive name.
  public func header(_ name: String) -> String? {
    headers.first { HTTPRequest.sameFieldName($0.name, name) }?.value
  }

  /// A JSON error body `{"error": KIND, "message": ...}`.
  public static func error(_ status: Int, kind: String, message: String) -> HTTPResponse {
    let body = "{\"error\":\(JSONValue.quote(kind)),\"message\":\(JSONValue.quote(message))}\n"
    var response = HTTPResponse(
      status: status, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
    response.errorKind = kind
    return response
  }

  /// Status line, headers (with `Date`, `Content-Length` but on a 304, and, when closing,
  /// `Connection: close`) and body, as bytes. `headOnly` (an answer to HEAD) keeps every
  /// header GET would send, `Content-Length` included, and leaves the body out.
  public func serialized(keepAlive: Bool, headOnly: Bool = false) -> [UInt8] {
    let (head, body) = wire(keepAlive: keepAlive, headOnly: headOnly)
    return head + body
  }

  /// The same bytes as `serialized`, as the head and the body apart: a body of more than
  /// `bodyCopyLimit` bytes is the response's own storage, written without a copy; a smaller
  /// one is part of the head (one chunk costs less to send than two).
  func wire(keepAlive: Bool, headOnly: Bool = false) -> (head: [UInt8], body: [UInt8]) {
    let body = headOnly ? [] : self.body
    var bytes: [UInt8] = []
    bytes.reserveCapacity(256 + (body.count <= Self.bodyCopyLimit ? body.count : 0))
    // Appended piece by piece, with no string built in between: a memory hit writes tens of
    // thousands of these a second.
    bytes.append(contentsOf: "HTTP/1.1 ".utf8)
    Self.appendDecimal(status, to: &bytes)
    bytes.append(32)
    bytes.append(contentsOf: Self.reason(status).utf8)
    bytes.append(contentsOf: "\r\n".utf8)
    ResponseDate.appendHeaderLine(to: &bytes)
    for (name, value) in headers {
      Self.append(name, to: &bytes)
      bytes.append(contentsOf: ": ".utf8)
      Self.append(value, to: &bytes)
      bytes.append(contentsOf: "\r\n".utf8)
    }
    // A 304 has no body, and a Content-Length on it must be the 200's (RFC 9110, section
    // 8.6): none is sent rather than a 0 that would contradict the representation.
    if status != 304 {
      bytes.append(contentsOf: "Content-Length: ".utf8)
      Self.appendDecimal(self.body.count, to: &bytes)
      bytes.append(contentsOf: "\r\n".utf8)
    }
    if !keepAlive { bytes.append(contentsOf: "Connection: close\r\n".utf8) }
    bytes.append(contentsOf: "\r\n".utf8)
    guard body.count > Self.bodyCopyLimit else {
      bytes.append(contentsOf: body)
      return (bytes, [])
    }
    return (bytes, body)
  }

  /// Appends the UTF-8 of `text` as one copy (the generic sequence append of a string's
  /// `utf8` view was 2% of a memory hit).
  static func append(_ text: String, to bytes: inout [UInt8]) {
    var text = text
    text.withUTF8 { bytes.append(contentsOf: $0) }
  }

  /// Appends `value` (not negative) in decimal digits.
  static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
    let start = bytes.count
    var rest = UInt(max(0, value))
    repeat {
      bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
      rest /= 10
    } while rest > 0
    bytes[start...].reverse()
  }

  /// Bodies up to this size are copied after the head.
  static let bodyCopyLimit = 2048

  /// Equal status, headers (in order) and body.
  public static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
    lhs.status == rhs.status && lhs.body == rhs.body
      && lhs.headers.map { [$0.name, $0.value] } == rhs.headers.map { [$0.name, $0.value] }
  }

  /// Hashes status and body (headers are compared by `==`).
  public func hash(into hasher: inout Hasher) {
    hasher.combine(status)
    hasher.combine(body)
  }

  static func reason(_ status: Int) -> String {
    switch status {
    case 101: "Switching Protocols"
    case 200: "OK"
    case 304: "Not Modified"
    case 400: "Bad Request"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 413: "Content Too Large"
    case 415: "Unsupported Media Type"
    case 422: "Unprocessable Content"
    case 426: "Upgrade Required"
    case 500: "Internal Server Error"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    default: "Status"
    }
  }
}
