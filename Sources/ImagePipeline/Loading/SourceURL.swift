import ThumbWire

/// A source URL, parsed strictly: what the fetchers and the policy agree a URL means.
///
/// One parser for every decision, so the host the allowlist judged is the host that is
/// connected to. Refused outright: user info (`user:pass@`, which a transport would send as
/// credentials), percent-encoded or non-ASCII host names (use punycode), IPv6 zone ids,
/// control characters, ports outside 1...65535, and host names whose last label is a number
/// but that are not a dotted-quad IPv4 address (`0x7f.1`, `2130706433`: resolvers read
/// those as addresses). Other bytes a path or query may not hold (spaces, non-ASCII, `"<>\^`
/// and friends) are percent-encoded, as browsers do. The fragment is dropped.
public struct SourceURL: Sendable, Hashable, CustomStringConvertible {
  /// `http`, `https` or `file`, lower-cased (other schemes parse, for a clear refusal later).
  public let scheme: String
  /// The host, lower-cased, without a trailing dot; an IPv6 literal without brackets. Empty
  /// for `file` URLs.
  public let host: String
  /// The port, explicit or the scheme's default (0 for `file`).
  public let port: Int
  /// Path and query as they go on the wire (percent-encoded), starting with `/`.
  public let target: String

  /// Parses `text`, or throws `invalidURL` saying what is wrong.
  public init(_ text: String) throws(FetchError) {
    var bytes = Array(text.utf8)[...]
    guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > bytes.startIndex,
      Self.isSchemeStart(bytes[bytes.startIndex]),
      bytes[..<colon].allSatisfy(Self.isSchemeByte)
    else { throw .invalidURL("not a URL: it needs a scheme such as https:") }
    scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
    bytes = bytes[(colon + 1)...]
    guard bytes.starts(with: "//".utf8) else {
      throw .invalidURL("\(scheme) URLs need // and a host")
    }
    bytes = bytes.dropFirst(2)
    guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
      throw .invalidURL("control characters are not allowed in URLs")
    }
    if let hash = bytes.firstIndex(of: UInt8(ascii: "#")) { bytes = bytes[..<hash] }
    let authorityEnd =
      bytes.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? bytes.endIndex
    let authority = bytes[..<authorityEnd]
    (host, port) = try Self.parseAuthority(authority, scheme: scheme)
    var rest = Array(bytes[authorityEnd...])
    if rest.first != UInt8(ascii: "/") { rest.insert(UInt8(ascii: "/"), at: 0) }
    target = Self.normalizedTarget(rest)
  }

  private init(scheme: String, host: String, port: Int, target: String) {
    self.scheme = scheme
    self.host = host
    self.port = port
    self.target = target
  }

  /// The scheme's port when none is given.
  static func defaultPort(of scheme: String) -> Int {
    switch scheme {
    case "http": 80
    case "https": 443
    default: 0
    }
  }

  /// Whether the host is an IP address literal, which needs no name resolution.
  public var hostAddress: IPAddress? { IPAddress(host) }

  /// The host as written in a URL: IPv6 literals in brackets.
  public var hostForURL: String { host.contains(":") ? "[\(host)]" : host }

  /// The path without the query.
  public var path: String {
    String(target.prefix { $0 != "?" })
  }

  /// The URL in normal form: lower-case scheme and host, default port left out.
  public var description: String {
    let explicitPort = port == Self.defaultPort(of: scheme) ? "" : ":\(port)"
    return "\(scheme)://\(hostForURL)\(explicitPort)\(target)"
  }

  /// `text` in normal form when it parses (the spelling every cache key and purge uses, so
  /// `FILE://localhost/a.png#x` and `file:///a.png` name one source); as it is otherwise, to
  /// be refused with the parser's reason where it is fetched.
  public static func normalized(_ text: String) -> String {
    (try? SourceURL(text))?.description ?? text
  }

  /// A `Location` header resolved against this URL (RFC 3986, section 5.2), then parsed with
  /// the same rules.
  public func resolving(_ reference: String) throws(FetchError) -> SourceURL {
    let bytes = Array(reference.utf8)
    guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
      throw .invalidURL("control characters are not allowed in URLs")
    }
    if let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0,
      Self.isSchemeStart(bytes[0]), bytes[..<colon].allSatisfy(Self.isSchemeByte)
    {
      return try SourceURL(reference)
    }
    if reference.hasPrefix("//") { return try SourceURL(scheme + ":" + reference) }
    var relative = Array(bytes.prefix { $0 != UInt8(ascii: "#") })
    var newTarget: [UInt8]
    if relative.isEmpty {
      return self
    } else if relative.first == UInt8(ascii: "/") {
      newTarget = relative
    } else if relative.first == UInt8(ascii: "?") {
      newTarget = Array(path.utf8) + relative
    } else {
      // Merge with the base path's directory.
      let basePath = Array(path.utf8)
      let directory = basePath[...(basePath.lastIndex(of: UInt8(ascii: "/")) ?? 0)]
      relative = Array(directory) + relative
      newTarget = relative
    }
    return SourceURL(
      scheme: scheme, host: host, port: port, target: Self.normalizedTarget(newTarget))
  }

  // MARK: - Pieces

  private static func parseAuthority(
    _ authority: ArraySlice<UInt8>, scheme: String
  ) throws(FetchError) -> (String, Int) {
    guard !authority.contains(UInt8(ascii: "@")) else {
      throw .invalidURL("URLs with user info (user:password@) are not accepted")
    }
    var hostPart = authority
    var portText: ArraySlice<UInt8>?
    if authority.first == UInt8(ascii: "[") {
      guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else {
        throw .invalidURL("an IPv6 host needs a closing ]")
      }
      hostPart = authority[(authority.startIndex + 1)..<close]
      let after = authority[(close + 1)...]
      if !after.isEmpty {
        guard after.first == UInt8(ascii: ":") else { throw .invalidURL("bytes after the ]") }
        portText = after.dropFirst()
      }
      let literal = String(decoding: hostPart, as: UTF8.self)
      guard !literal.contains("%"), let address = IPAddress(literal), case .v6 = address else {
        throw .invalidURL("not an IPv6 address (zone ids are not accepted)")
      }
      return (address.description, try port(portText, scheme: scheme))
    }
    if let colon = authority.lastIndex(of: UInt8(ascii: ":")) {
      hostPart = authority[..<colon]
      portText = authority[(colon + 1)...]
    }
    let port = try port(portText, scheme: scheme)
    if scheme == "file" {
      let host = String(decoding: hostPart, as: UTF8.self).lowercased()
      guard host.isEmpty || host == "localhost" else {
        throw .notAllowed("file URLs may not name a host")
      }
      return ("", 0)
    }
    return (try hostName(hostPart), port)
  }

  private static func port(_ text: ArraySlice<UInt8>?, scheme: String) throws(FetchError) -> Int {
    guard let text, !text.isEmpty else { return defaultPort(of: scheme) }
    guard text.count <= 5, text.allSatisfy({ $0 >= 48 && $0 <= 57 }),
      let value = Int(String(decoding: text, as: UTF8.self)), (1...65_535).contains(value)
    else { throw .invalidURL("the port must be a number in 1...65535") }
    return value
  }

  /// A DNS name or dotted-quad IPv4 literal, lower-cased, one trailing dot dropped.
  private static func hostName(_ raw: ArraySlice<UInt8>) throws(FetchError) -> String {
    guard !raw.isEmpty else { throw .invalidURL("the URL has no host") }
    guard raw.allSatisfy({ $0 < 0x80 }) else {
      throw .invalidURL("host names must be ASCII (use the punycode form)")
    }
    var text = String(decoding: raw, as: UTF8.self).lowercased()
    if text.hasSuffix(".") { text.removeLast() }
    let labels = text.split(separator: ".", omittingEmptySubsequences: false)
    guard text.utf8.count <= 253, !labels.isEmpty,
      labels.allSatisfy({ label in
        !label.isEmpty && label.utf8.count <= 63 && label.first != "-" && label.last != "-"
          && label.utf8.allSatisfy { isLetterOrDigit($0) || $0 == 45 || $0 == 95 }
      })
    else { throw .invalidURL("not a valid host name") }
    // WHATWG: a host whose last label is numeric is an IPv4 address; resolvers agree
    // (inet_aton reads 0x7f.1 as 127.0.0.1). Only the canonical dotted quad is accepted.
    let last = labels.last!.utf8
    let numeric =
      last.allSatisfy { $0 >= 48 && $0 <= 57 }
      || (last.starts(with: "0x".utf8) && last.dropFirst(2).allSatisfy(isHexDigit))
    if numeric {
      guard case .v4? = IPAddress(text), IPAddress(text)!.description == text else {
        throw .invalidURL("a numeric host must be a dotted-quad IPv4 address")
      }
    }
    return text
  }

  /// Percent-encodes what may not stand in a path or query, and removes dot segments from
  /// the path. Every memory hit parses its source URL, so this works on bytes, in one pass
  /// when nothing needs escaping and the path has no dot segment.
  private static func normalizedTarget(_ bytes: [UInt8]) -> String {
    let query = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
    let path = bytes[..<query]
    let dotted = hasDotSegment(path)
    let kept = dotted ? removingDotSegments(Array(path))[...] : path
    let tail = bytes[query...]
    var escapes = 0
    for byte in kept where !isAllowedInTarget(byte) { escapes += 1 }
    for byte in tail where !isAllowedInTarget(byte) { escapes += 1 }
    // Every byte kept as it is: the target is the bytes.
    if escapes == 0 && !dotted { return String(decoding: bytes, as: UTF8.self) }
    return String(unsafeUninitializedCapacity: kept.count + tail.count + 2 * escapes) { out in
      var count = 0
      escape(kept, into: out, at: &count)
      escape(tail, into: out, at: &count)
      return count
    }
  }

  /// Writes `part` into `out` from `count` on, percent-encoding what may not stand in a target.
  private static func escape(
    _ part: ArraySlice<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>, at count: inout Int
  ) {
    let digits: StaticString = "0123456789ABCDEF"
    for byte in part {
      if isAllowedInTarget(byte) {
        out[count] = byte
        count += 1
      } else {
        out[count] = UInt8(ascii: "%")
        out[count + 1] = digits.utf8Start[Int(byte >> 4)]
        out[count + 2] = digits.utf8Start[Int(byte & 15)]
        count += 3
      }
    }
  }

  /// Whether a path starting with `/` has a `.` or `..` segment (what `removingDotSegments`
  /// changes); true for any other path, which that function then reads.
  private static func hasDotSegment(_ path: ArraySlice<UInt8>) -> Bool {
    guard path.first == UInt8(ascii: "/") else { return true }
    var segmentStart = path.startIndex + 1
    var index = segmentStart
    while true {
      if index == path.endIndex || path[index] == UInt8(ascii: "/") {
        let length = index - segmentStart
        if length == 1 || length == 2, path[segmentStart] == UInt8(ascii: "."),
          length == 1 || path[segmentStart + 1] == UInt8(ascii: ".")
        {
          return true
        }
        if index == path.endIndex { return false }
        segmentStart = index + 1
      }
      index += 1
    }
  }

  /// RFC 3986, section 5.2.4, on a path starting with `/`.
  private static func removingDotSegments(_ path: [UInt8]) -> [UInt8] {
    let segments = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
      .dropFirst()
    var output: [ArraySlice<UInt8>] = []
    for (index, segment) in segments.enumerated() {
      let isLast = index == segments.count - 1
      if segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8) {
        if segment.count == 2, !output.isEmpty { output.removeLast() }
        if isLast { output.append([]) }
      } else {
        output.append(segment)
      }
    }
    var result: [UInt8] = []
    for segment in output {
      result.append(UInt8(ascii: "/"))
      result += segment
    }
    return result.isEmpty ? [UInt8(ascii: "/")] : result
  }

  private static func isSchemeStart(_ byte: UInt8) -> Bool {
    (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
  }

  private static func isSchemeByte(_ byte: UInt8) -> Bool {
    isLetterOrDigit(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
      || byte == UInt8(ascii: ".")
  }

  private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
    (byte >= 48 && byte <= 57) || ((byte | 0x20) >= 97 && (byte | 0x20) <= 122)
  }

  private static func isHexDigit(_ byte: UInt8) -> Bool {
    (byte >= 48 && byte <= 57) || ((byte | 0x20) >= 97 && (byte | 0x20) <= 102)
  }

  /// RFC 3986 unreserved, sub-delims, `:@/?%` (escapes kept as given).
  @inline(__always)
  private static func isAllowedInTarget(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"):
      true
    case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
      UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"),
      UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"),
      UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"),
      UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "%"):
      true
    default: false
    }
  }
}

extension SourceURL {
  /// The decoded filesystem path of a `file` URL; nil when it holds a NUL. Bytes that are not
  /// UTF-8 name a file too (`%E9` for a Latin-1 "é"): they are kept as `PathBytes` spells
  /// them.
  package var filePath: String? {
    let encoded = Array(path.utf8)
    var bytes: [UInt8] = []
    var index = 0
    while index < encoded.count {
      if encoded[index] == UInt8(ascii: "%"), index + 2 < encoded.count,
        let value = UInt8(
          String(decoding: encoded[(index + 1)...(index + 2)], as: UTF8.self), radix: 16)
      {
        bytes.append(value)
        index += 3
      } else {
        bytes.append(encoded[index])
        index += 1
      }
    }
    guard !bytes.contains(0) else { return nil }
    return PathBytes.string(bytes)
  }
}
