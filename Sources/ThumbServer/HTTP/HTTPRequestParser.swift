import ThumbSystem
import ThumbWire

/// Why a request was refused. Every case means "400 Bad Request, then close", except
/// `bodyTooLarge` (413).
public enum HTTPParseError: Error, Sendable, Hashable {
  case requestLineTooLong
  case headersTooLarge
  case tooManyHeaders
  case malformedRequestLine
  case unsupportedVersion
  case malformedHeader
  case obsoleteLineFolding
  case bareLineFeed
  case missingHost
  /// More than one Host field (RFC 9112, section 3.2: answer 400).
  case duplicateHost
  case invalidContentLength
  case unsupportedTransferEncoding
  case bodyTooLarge
  case malformedTarget
}

extension HTTPParseError: CaseIterable, CustomStringConvertible {
  /// A sentence for the client's error body and the log (not the case's name).
  public var description: String {
    switch self {
    case .requestLineTooLong: "The request line is too long."
    case .headersTooLarge: "The request's header fields are too large."
    case .tooManyHeaders: "The request has too many header fields."
    case .malformedRequestLine: "The request line is not METHOD TARGET HTTP/1.x."
    case .unsupportedVersion: "Only HTTP/1.0 and HTTP/1.1 are served."
    case .malformedHeader: "A header field is malformed."
    case .obsoleteLineFolding: "A header field is folded over lines, which HTTP/1.1 forbids."
    case .bareLineFeed: "A line ends in a bare line feed; HTTP needs CR LF."
    case .missingHost: "An HTTP/1.1 request needs a Host field."
    case .duplicateHost: "The request has more than one Host field."
    case .invalidContentLength: "The Content-Length is not a single decimal number."
    case .unsupportedTransferEncoding: "Only bodies with a Content-Length are accepted."
    case .bodyTooLarge: "The request body is too large."
    case .malformedTarget: "The request target is malformed."
    }
  }
}

/// Size limits for request heads and bodies.
public struct HTTPLimits: Sendable, Hashable {
  /// Longest request line, CRLF excluded.
  public var maxRequestLine: Int
  /// Largest request head (request line and all header lines).
  public var maxHeadBytes: Int
  /// Most header fields.
  public var maxHeaders: Int
  /// Largest body.
  public var maxBodyBytes: Int

  /// Creates limits; the defaults suit a thumbnail API (GET with a long query).
  public init(
    maxRequestLine: Int = 8192, maxHeadBytes: Int = 16384, maxHeaders: Int = 64,
    maxBodyBytes: Int = 65536
  ) {
    self.maxRequestLine = maxRequestLine
    self.maxHeadBytes = maxHeadBytes
    self.maxHeaders = maxHeaders
    self.maxBodyBytes = maxBodyBytes
  }
}

/// Request heads seen before, by their bytes: a head identical byte for byte to one parsed
/// under the same limits parses to the same request, so a parser given these takes the
/// request it names instead of parsing again. (The event loops' `ReadyResponses` remember the
/// heads of the memory hits they keep: a client repeating a request is not parsed again.)
public protocol KnownHeads: AnyObject, Sendable {
  /// The request `head` parses to under `limits`, if it is known: exactly what `parse` would
  /// make of those bytes (without `rawHead`), or nil.
  func request(for head: ArraySlice<UInt8>, limits: HTTPLimits) -> HTTPRequest?
}

/// An incremental, strict HTTP/1.1 request parser: bytes in, complete requests out, so
/// pipelined requests and requests split across reads both work. It accepts only origin-form
/// targets, CRLF line ends, token methods and field names, no line folding, no
/// Transfer-Encoding (a body needs Content-Length), and requires Host on HTTP/1.1. After an
/// error the connection must be closed: the parser does not resynchronise.
public struct HTTPRequestParser: Sendable {
  /// The limits in force.
  public let limits: HTTPLimits
  /// Bytes received; those before `consumed` are parsed already. They are dropped when a
  /// feed's parsing ends, so one read's requests are parsed where they lie, unmoved.
  private var buffer: [UInt8] = []
  private var consumed = 0
  private var pendingHead: HTTPRequest?
  private var pendingBody = 0
  /// Heads known already; with them, the bytes of every GET and HEAD head are kept in its
  /// request (`rawHead`), so it can become known.
  private let known: (any KnownHeads)?

  /// Creates a parser.
  public init(limits: HTTPLimits = HTTPLimits()) { self.init(limits: limits, known: nil) }

  /// Creates a parser that takes heads `known` knows without parsing them, and keeps the
  /// bytes of every GET and HEAD head it parses in the request's `rawHead`.
  public init(limits: HTTPLimits, known: (any KnownHeads)?) {
    self.limits = limits
    self.known = known
  }

  /// Bytes received but not yet part of a complete request.
  public var bufferedBytes: Int { buffer.count - consumed }

  /// Set after a request asking for a protocol upgrade: parsing stops there, because the
  /// bytes after it may belong to the new protocol. `resume()` goes on if the upgrade is
  /// declined; `takeRemainder()` hands the bytes over if it is accepted.
  public private(set) var awaitingUpgradeDecision = false

  /// Adds received bytes and returns every request they complete, in order.
  public mutating func feed(_ bytes: some Sequence<UInt8>) throws(HTTPParseError) -> [HTTPRequest] {
    buffer.append(contentsOf: bytes)
    return try parseAvailable()
  }

  /// Continues after a declined upgrade, returning the requests already buffered behind it.
  public mutating func resume() throws(HTTPParseError) -> [HTTPRequest] {
    awaitingUpgradeDecision = false
    return try parseAvailable()
  }

  private mutating func parseAvailable() throws(HTTPParseError) -> [HTTPRequest] {
    defer { dropConsumed() }
    var requests: [HTTPRequest] = []
    while !awaitingUpgradeDecision, let request = try nextRequest() {
      requests.append(request)
      if request.header("upgrade") != nil { awaitingUpgradeDecision = true }
    }
    return requests
  }

  /// Forgets the parsed bytes (nearly always all of them: the storage is kept for the next
  /// read).
  private mutating func dropConsumed() {
    if consumed == buffer.count {
      buffer.removeAll(keepingCapacity: true)
    } else if consumed > 0 {
      buffer.removeFirst(consumed)
    }
    consumed = 0
  }

  /// Takes the bytes after the last complete request (for a protocol upgrade).
  public mutating func takeRemainder() -> [UInt8] {
    dropConsumed()
    defer { buffer.removeAll() }
    return buffer
  }

  private mutating func nextRequest() throws(HTTPParseError) -> HTTPRequest? {
    if var head = pendingHead {
      guard bufferedBytes >= pendingBody else { return nil }
      head.body = Array(buffer[consumed..<(consumed + pendingBody)])
      consumed += pendingBody
      pendingHead = nil
      return head
    }
    guard let headEnd = findHeadEnd() else {
      try checkIncompleteHead()
      return nil
    }
    let head = buffer[consumed..<headEnd]
    var request: HTTPRequest
    if let known, let same = known.request(for: head, limits: limits) {
      request = same
    } else {
      request = try Self.parseHead(head, limits: limits)
      if known != nil && (request.method == "GET" || request.method == "HEAD") {
        request.rawHead = Array(head)
      }
    }
    consumed = headEnd + 4
    let length = try Self.contentLength(request)
    guard length <= limits.maxBodyBytes else { throw .bodyTooLarge }
    if length == 0 { return request }
    if bufferedBytes >= length {
      request.body = Array(buffer[consumed..<(consumed + length)])
      consumed += length
      return request
    }
    pendingHead = request
    pendingBody = length
    return nil
  }

  /// Index in `buffer` of the CRLFCRLF ending the head that starts at `consumed`, if present.
  private func findHeadEnd() -> Int? {
    buffer.withUnsafeBufferPointer { bytes in
      var i = consumed
      while i + 3 < bytes.count {
        if bytes[i + 3] != 10 {
          // No CRLFCRLF starts at i or i + 2 (each needs an LF at i + 3), nor at i + 1 or
          // i + 3 unless i + 3 holds a CR.
          i += bytes[i + 3] == 13 ? 1 : 4
          continue
        }
        if bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 { return i }
        i += 1
      }
      return nil
    }
  }

  /// Fails early on an incomplete head that already breaks the limits.
  private func checkIncompleteHead() throws(HTTPParseError) {
    let pending = buffer[consumed...]
    if pending.count > limits.maxHeadBytes + 4 { throw .headersTooLarge }
    if let lineEnd = pending.firstIndex(of: 10) {
      if lineEnd - consumed > limits.maxRequestLine + 1 { throw .requestLineTooLong }
    } else if pending.count > limits.maxRequestLine + 1 {
      throw .requestLineTooLong
    }
  }

  /// Parses a request head (the bytes before its blank line). Two passes, neither of which
  /// collects lines: the first refuses a bare LF anywhere and counts the fields, the second
  /// parses each line where it lies.
  static func parseHead(_ head: ArraySlice<UInt8>, limits: HTTPLimits) throws(HTTPParseError)
    -> HTTPRequest
  {
    guard head.count <= limits.maxHeadBytes else { throw .headersTooLarge }
    var fields = 0
    var start = head.startIndex
    var firstLineEnd: Int?
    for i in head.indices where head[i] == 10 {
      guard i > start, head[i - 1] == 13 else { throw .bareLineFeed }
      if firstLineEnd == nil { firstLineEnd = i - 1 }
      fields += 1
      start = i + 1
    }
    let requestLine = head[head.startIndex..<(firstLineEnd ?? head.endIndex)]
    guard requestLine.count <= limits.maxRequestLine else { throw .requestLineTooLong }
    var request = try parseRequestLine(requestLine)
    guard fields <= limits.maxHeaders else { throw .tooManyHeaders }
    if fields > 0 {
      request.headers.reserveCapacity(fields)
      start = requestLine.endIndex + 2
      var i = start
      while i < head.endIndex {
        if head[i] == 10 {
          request.headers.append(try parseHeader(head[start..<(i - 1)]))
          start = i + 1
        }
        i += 1
      }
      request.headers.append(try parseHeader(head[start..<head.endIndex]))
    }
    var hosts = 0
    for field in request.headers where field.name == "host" { hosts += 1 }
    if request.minorVersion == 1 && hosts == 0 { throw .missingHost }
    if hosts > 1 { throw .duplicateHost }
    return request
  }

  private static func parseRequestLine(_ line: ArraySlice<UInt8>) throws(HTTPParseError)
    -> HTTPRequest
  {
    // Exactly two single spaces: method SP target SP version.
    guard let firstSpace = line.firstIndex(of: 32),
      let secondSpace = line[(firstSpace + 1)...].firstIndex(of: 32),
      !line[(secondSpace + 1)...].contains(32)
    else { throw .malformedRequestLine }
    let method = line[..<firstSpace]
    guard !method.isEmpty, method.allSatisfy(HTTPSyntax.isTokenByte) else {
      throw .malformedRequestLine
    }
    let version = line[(secondSpace + 1)...]
    let minor: Int
    if version.elementsEqual("HTTP/1.1".utf8) {
      minor = 1
    } else if version.elementsEqual("HTTP/1.0".utf8) {
      minor = 0
    } else if version.starts(with: "HTTP/".utf8) {
      throw .unsupportedVersion
    } else {
      throw .malformedRequestLine
    }
    let target = line[(firstSpace + 1)..<secondSpace]
    guard target.first == UInt8(ascii: "/"), target.allSatisfy({ $0 > 32 && $0 < 127 }) else {
      throw .malformedTarget
    }
    // Split and decode on bytes: Character-level String scanning costs more than the rest of
    // a memory-hit request.
    let mark = target.firstIndex(of: UInt8(ascii: "?"))
    guard let path = percentDecode(target[..<(mark ?? target.endIndex)], plusIsSpace: false) else {
      throw .malformedTarget
    }
    var query: [HTTPRequest.QueryItem] = []
    if let mark {
      // Pairs split at '&', empty ones skipped.
      var start = mark + 1
      while start < target.endIndex {
        let end = target[start...].firstIndex(of: UInt8(ascii: "&")) ?? target.endIndex
        if end > start {
          let pair = target[start..<end]
          let equals = pair.firstIndex(of: UInt8(ascii: "="))
          guard let name = percentDecode(pair[..<(equals ?? end)], plusIsSpace: true),
            let value = equals.map({ percentDecode(pair[($0 + 1)...], plusIsSpace: true) }) ?? ""
          else { throw .malformedTarget }
          query.append(.init(name: name, value: value))
        }
        start = end + 1
      }
    }
    return HTTPRequest(
      method: String(decoding: method, as: UTF8.self),
      target: String(decoding: target, as: UTF8.self), path: path, query: query,
      minorVersion: minor, headers: [], body: [])
  }

  private static func parseHeader(_ line: ArraySlice<UInt8>) throws(HTTPParseError)
    -> HTTPRequest.HeaderField
  {
    guard let first = line.first else { throw .malformedHeader }
    if first == 32 || first == 9 { throw .obsoleteLineFolding }
    guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .malformedHeader }
    let name = line[line.startIndex..<colon]
    guard !name.isEmpty, name.allSatisfy(HTTPSyntax.isTokenByte) else { throw .malformedHeader }
    var value = line[(colon + 1)...]
    while let b = value.first, b == 32 || b == 9 { value = value.dropFirst() }
    while let b = value.last, b == 32 || b == 9 { value = value.dropLast() }
    // Field values: visible ASCII, spaces, tabs and obs-text; never other control bytes.
    guard value.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else { throw .malformedHeader }
    // Token bytes are ASCII: lowering them byte by byte is what `lowercased()` would do,
    // without its Unicode tables.
    let lowered = String(unsafeUninitializedCapacity: name.count) { buffer in
      for (i, b) in name.enumerated() {
        buffer[i] = b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") ? b + 32 : b
      }
      return name.count
    }
    return .init(name: lowered, value: String(decoding: value, as: UTF8.self))
  }

  private static func contentLength(_ request: HTTPRequest) throws(HTTPParseError) -> Int {
    var first: String?
    var agree = true
    for field in request.headers {
      if field.name == "transfer-encoding" { throw .unsupportedTransferEncoding }
      guard field.name == "content-length" else { continue }
      // Every Content-Length must say the same.
      if let first { agree = agree && field.value == first } else { first = field.value }
    }
    guard let first else { return 0 }
    guard agree, !first.isEmpty, first.utf8.count <= 18,
      first.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let length = Int(first)
    else { throw .invalidContentLength }
    return length
  }

  /// Decodes %XX escapes (and '+' as space in queries); nil on a broken escape or bad UTF-8.
  static func percentDecode(_ text: Substring, plusIsSpace: Bool) -> String? {
    percentDecode(ArraySlice(text.utf8), plusIsSpace: plusIsSpace)
  }

  static func percentDecode(_ text: ArraySlice<UInt8>, plusIsSpace: Bool) -> String? {
    if !text.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) {
      return utf8String(text)
    }
    // Decoded straight into the string's storage while every byte is ASCII (a URL parameter
    // nearly always is); otherwise again, into an array, to validate the UTF-8.
    var nonASCII = false
    var whole = true
    let decoded = String(unsafeUninitializedCapacity: text.count) { out in
      var count = 0
      whole = decodeEscapes(text, plusIsSpace: plusIsSpace) { b in
        guard b < 0x80 else {
          nonASCII = true
          return false
        }
        out[count] = b
        count += 1
        return true
      }
      return whole ? count : 0
    }
    if whole { return decoded }
    guard nonASCII else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.count)
    let decodes = decodeEscapes(text, plusIsSpace: plusIsSpace) { b in
      bytes.append(b)
      return true
    }
    guard decodes else { return nil }
    return String(validating: bytes, as: UTF8.self)
  }

  /// Hands `emit` each byte `text` decodes to, in order (%XX escapes, and '+' as a space when
  /// `plusIsSpace`). False on a broken escape, or as soon as `emit` returns false.
  @inline(__always)
  private static func decodeEscapes(
    _ text: ArraySlice<UInt8>, plusIsSpace: Bool, _ emit: (UInt8) -> Bool
  ) -> Bool {
    var index = text.startIndex
    while index < text.endIndex {
      var b = text[index]
      if b == UInt8(ascii: "%") {
        guard index + 2 < text.endIndex, let h = hexValue(text[index + 1]),
          let l = hexValue(text[index + 2])
        else { return false }
        b = h << 4 | l
        index += 3
      } else {
        if b == UInt8(ascii: "+") && plusIsSpace { b = 32 }
        index += 1
      }
      guard emit(b) else { return false }
    }
    return true
  }

  /// `bytes` as a string when they are valid UTF-8. ASCII, what nearly every target is,
  /// needs no validation (the generic validating initialiser was 2.7% of a memory hit).
  private static func utf8String(_ bytes: ArraySlice<UInt8>) -> String? {
    if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
    return String(validating: bytes, as: UTF8.self)
  }

  private static func hexValue(_ b: UInt8) -> UInt8? {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - 48
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - 87
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - 55
    default: return nil
    }
  }
}
