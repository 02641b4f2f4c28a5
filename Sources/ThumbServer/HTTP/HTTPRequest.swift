import ImagePipeline
import ThumbSystem

/// One parsed HTTP/1.1 request.
public struct HTTPRequest: Sendable, Hashable {
  /// The method token, e.g. "GET".
  public var method: String
  /// The request target as sent (origin form: path and query).
  public var target: String
  /// The percent-decoded path.
  public var path: String
  /// Query parameters in order, percent-decoded ('+' is a space).
  public var query: [QueryItem]
  /// 0 for HTTP/1.0, 1 for HTTP/1.1.
  public var minorVersion: Int
  /// Header fields in order, names lower-cased.
  public var headers: [HeaderField]
  /// The body (Content-Length bytes).
  public var body: [UInt8]
  /// Whether it came over a network listener (TCP) rather than the Unix socket, for routes
  /// that only local clients may use.
  public var overNetwork = false
  /// The address of the peer that sent it, for a TCP connection.
  public var peer: IPAddress?
  /// An instant by which it had begun to arrive (its first byte was in the server's socket),
  /// or later: its client sent it after any change it knew of, so a check of its source made
  /// after this moment is fresh for it.
  public var received: ContinuousClock.Instant?
  /// The head's bytes as they came (request line and fields, before the blank line), kept by
  /// a parser given `KnownHeads` for a GET or HEAD it parsed (nil for one it knew).
  public var rawHead: [UInt8]?

  /// One `name=value` pair of the query.
  public struct QueryItem: Sendable, Hashable {
    /// The decoded name.
    public var name: String
    /// The decoded value ("" when absent).
    public var value: String
  }

  /// One header field.
  public struct HeaderField: Sendable, Hashable {
    /// Lower-cased field name.
    public var name: String
    /// The value, surrounding whitespace removed.
    public var value: String
  }

  /// The request as a route that reads only the headers `names` (lower case) sees it: the
  /// other fields left out (`Route.reads`).
  public func seeing(_ names: Set<String>) -> HTTPRequest {
    var seen = self
    seen.headers = headers.filter { names.contains($0.name) }
    return seen
  }

  /// The first value of a header, by case-insensitive name.
  public func header(_ name: String) -> String? {
    // Stored names are lower case, and so are the callers' names: compare as given first,
    // with no new string per lookup. Names are ASCII tokens, compared ASCII-insensitively
    // (RFC 9110, section 5.1), so only a name with an ASCII capital needs another look.
    if let field = headers.first(where: { $0.name == name }) { return field.value }
    let capital = UInt8(ascii: "A")...UInt8(ascii: "Z")
    guard name.utf8.contains(where: capital.contains) else { return nil }
    let lowered = String(
      decoding: name.utf8.map { capital.contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    return headers.first { $0.name == lowered }?.value
  }

  /// Whether two field names are the same, compared ASCII-case-insensitively (RFC 9110,
  /// section 5.1), with no new string made.
  static func sameFieldName(_ a: String, _ b: String) -> Bool {
    guard a.utf8.count == b.utf8.count else { return false }
    return zip(a.utf8, b.utf8).allSatisfy { x, y in
      x == y
        || (x | 0x20 == y | 0x20 && (x | 0x20) >= UInt8(ascii: "a")
          && (x | 0x20) <= UInt8(ascii: "z"))
    }
  }

  /// The first value of a query parameter.
  public func queryValue(_ name: String) -> String? {
    query.first { $0.name == name }?.value
  }

  /// Whether the connection stays open after the response, per version and `Connection`.
  public var keepAlive: Bool {
    // Asked for every request; most carry no Connection header, which needs no token set.
    guard headers.contains(where: { $0.name == "connection" }) else { return minorVersion >= 1 }
    let tokens = connectionTokens
    if tokens.contains("close") { return false }
    return minorVersion >= 1 || tokens.contains("keep-alive")
  }

  /// The lower-cased tokens of the `Connection` header.
  public var connectionTokens: Set<String> {
    Set(
      headers.filter { $0.name == "connection" }.flatMap {
        $0.value.lowercased().split(separator: ",").map {
          String($0.trimmingWhitespace())
        }
      })
  }
}
