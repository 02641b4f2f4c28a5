import ImagePipeline

extension FuzzTarget {
  /// The origin response head parser and the dates in it.
  static let responseHead = FuzzTarget(
    name: "response-head",
    covers:
      "ResponseHead and HTTPDate: a head parses or throws; its length is non-negative or refused; Retry-After is finite and non-negative; a date formats back to itself",
    maxLength: 16_384
  ) { bytes in
    if let head = try? ResponseHead(parsing: bytes) {
      require((100...999).contains(head.status), "status \(head.status)")
      if let length = try? head.declaredLength() { require(length >= 0, "length \(length)") }
      if let wait = head.retryAfter(now: 1_700_000_000) {
        require(wait.isFinite && wait >= 0, "Retry-After \(wait)")
      }
    }
    if let seconds = HTTPDate.parse(text(bytes)) {
      require(seconds.isFinite, "date \(seconds)")
      let printed = HTTPDate.format(seconds)
      require(HTTPDate.parse(printed) == seconds.rounded(.down), "\(printed) is not \(seconds)")
    }
  }
}
