import ThumbServer

extension FuzzTarget {
  /// The HTTP/1.1 request parser, fed whole and in pieces.
  static let httpRequest = FuzzTarget(
    name: "http-request",
    covers:
      "HTTPRequestParser: the same requests and error whether the bytes come at once or a byte at a time, and when every head is known from a first parse (KnownHeads); every request within the limits",
    maxLength: 24_576
  ) { bytes in
    let limits = HTTPLimits()
    let whole = HTTPParse(limits: limits, chunks: [bytes[...]])
    let split = HTTPParse(limits: limits, chunks: pieces(of: bytes))
    require(
      (whole.error == nil) == (split.error == nil),
      "whole: \(String(describing: whole.error)), in pieces: \(String(describing: split.error))")
    // A parser that keeps heads' bytes parses alike; then, with every GET and HEAD head of
    // that parse known, the parser takes those requests instead of parsing, and must end
    // exactly where parsing does.
    let keeping = HTTPParse(
      limits: limits, chunks: [bytes[...]], known: EveryHead(learning: [], limits: limits))
    require(keeping.error == whole.error, "keeping heads: \(String(describing: keeping.error))")
    require(
      keeping.requests.map(EveryHead.withoutHead) == whole.requests, "keeping heads changed them")
    let known = EveryHead(learning: keeping.requests, limits: limits)
    let again = HTTPParse(limits: limits, chunks: [bytes[...]], known: known)
    require(again.error == whole.error, "known heads: \(String(describing: again.error))")
    require(
      again.requests.map(EveryHead.withoutHead) == whole.requests,
      "known heads gave other requests")
    require(again.remainder == whole.remainder, "known heads left another remainder")
    // Every kept head was found again (and, after an error, repeats of them in the requests
    // the error dropped may have been found too).
    let kept = keeping.requests.count { $0.rawHead != nil }
    require(
      whole.error == nil ? known.found == kept : known.found >= kept,
      "\(known.found) heads found for \(kept)")
    if whole.error == nil {
      require(whole.requests == split.requests, "requests differ when split")
      require(whole.remainder == split.remainder, "remainders differ when split")
    } else {
      // A feed that throws drops what it parsed before: in pieces, more came out first.
      require(
        split.requests.starts(with: whole.requests), "split requests do not extend the whole")
    }
    for request in split.requests {
      require(request.headers.count <= limits.maxHeaders, "\(request.headers.count) headers")
      require(request.body.count <= limits.maxBodyBytes, "body of \(request.body.count)")
      require(request.target.utf8.count <= limits.maxRequestLine, "target too long")
      require(request.headers.count { $0.name == "host" } <= 1, "two Host fields passed")
      for field in request.headers {
        require(field.name == field.name.lowercased(), "field name not lowercased")
        require(!field.value.utf8.contains(13) && !field.value.utf8.contains(10), "CR/LF in value")
      }
    }
  }
}

/// Every GET and HEAD head one parse met, known byte for byte (as the loops' ready responses
/// know the heads of their entries).
final class EveryHead: KnownHeads, @unchecked Sendable {
  // @unchecked: one fuzz input's thread only.
  private var heads: [[UInt8]: HTTPRequest] = [:]
  private let limits: HTTPLimits
  /// Heads found so far.
  private(set) var found = 0

  /// The heads of `requests` (those whose bytes were kept), parsed under `limits`.
  init(learning requests: [HTTPRequest], limits: HTTPLimits) {
    self.limits = limits
    for request in requests {
      guard let head = request.rawHead else { continue }
      var parsed = Self.withoutHead(request)
      parsed.body = []
      heads[head] = parsed
    }
  }

  /// `request` without its head's bytes.
  static func withoutHead(_ request: HTTPRequest) -> HTTPRequest {
    var request = request
    request.rawHead = nil
    return request
  }

  func request(for head: ArraySlice<UInt8>, limits: HTTPLimits) -> HTTPRequest? {
    guard limits == self.limits, let request = heads[Array(head)] else { return nil }
    found += 1
    return request
  }
}

/// All requests a parser returns for the chunks, declining every upgrade.
struct HTTPParse {
  var requests: [HTTPRequest] = []
  var error: HTTPParseError?
  var remainder: [UInt8] = []

  init(limits: HTTPLimits, chunks: [ArraySlice<UInt8>], known: (any KnownHeads)? = nil) {
    var parser = HTTPRequestParser(limits: limits, known: known)
    do throws(HTTPParseError) {
      for chunk in chunks {
        requests += try parser.feed(chunk)
        while parser.awaitingUpgradeDecision { requests += try parser.resume() }
      }
    } catch {
      self.error = error
    }
    remainder = parser.takeRemainder()
  }
}
