import ImagePipeline

extension FuzzTarget {
  /// Freshness from an origin's head, and source versions read back from the cache directory.
  static let freshness = FuzzTarget(
    name: "freshness",
    covers:
      "CacheDirectives, FreshnessRules and SourceVersionCoding: any Cache-Control, Expires, Date and Age give a lifetime within the configured bounds and a finite deadline no later than max_ttl from now; a stored version decodes or is refused, and what decodes encodes back to the same bytes",
    maxLength: 8192
  ) { bytes in
    let directives = CacheDirectives(values: [text(bytes)])
    for age in [directives.maxAge, directives.sharedMaxAge, directives.staleIfError] {
      if let age { require(age >= 0 && age <= 2_147_483_648, "age \(age)") }
    }
    let now = 1_700_000_000.0
    let rules = FreshnessRules(staleWhileRevalidate: 30, staleIfError: 60)
    if let head = try? ResponseHead(parsing: Array("HTTP/1.1 200 OK\r\n".utf8) + bytes) {
      let freshness = rules.freshness(of: head, requestTime: now - 1, responseTime: now)
      require(
        freshness.lifetime >= 0 && freshness.lifetime <= rules.maxTTL,
        "lifetime \(freshness.lifetime)")
      require(
        freshness.freshUntil.isFinite && freshness.freshUntil <= now + rules.maxTTL,
        "deadline \(freshness.freshUntil)")
      require(
        (0...rules.staleWhileRevalidate).contains(freshness.staleWhileRevalidate)
          && (0...rules.staleIfError).contains(freshness.staleIfError),
        "stale allowances \(freshness.staleWhileRevalidate) \(freshness.staleIfError)")
    }
    if let (version, length) = PipelineFuzzing.sourceVersion(bytes) {
      require(length > 0 && length <= bytes.count, "length \(length)")
      require(
        PipelineFuzzing.encodeSourceVersion(version) == Array(bytes[..<length]),
        "a decoded version does not encode back to its bytes")
    }
  }
}
