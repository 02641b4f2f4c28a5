import ThumbServer

extension FuzzTarget {
  /// The HTTP/1.1 request parser, fed whole and in pieces.
  static let httpRequest = FuzzTarget(
    name: "http-request",
    covers:
      "HTTPRequestParser: the same requests and error whether the bytes come at once or a byte at a time; every request within the limits",
    maxLength: 24_576
  ) { bytes in
    let limits = HTTPLimits()
    let whole = HTTPParse(limits: limits, chunks: [bytes[...]])
    let split = HTTPParse(limits: limits, chunks: pieces(of: bytes))
    require(
      (whole.error == nil) == (split.error == nil),
      "whole: \(String(describing: whole.error)), in pieces: \(String(describing: split.error))")
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

/// All requests a parser returns for the chunks, declining every upgrade.
struct HTTPParse {
  var requests: [HTTPRequest] = []
  var error: HTTPParseError?
  var remainder: [UInt8] = []

  init(limits: HTTPLimits, chunks: [ArraySlice<UInt8>]) {
    var parser = HTTPRequestParser(limits: limits)
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
