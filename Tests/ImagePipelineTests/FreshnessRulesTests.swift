import ImagePipeline
import Testing

/// RFC 9111's freshness, computed from heads alone, and versions as the disk stores them.
@Suite("Freshness rules")
struct FreshnessRulesTests {
  static let now = 1_800_000_000.0

  static func head(_ lines: String...) throws -> ResponseHead {
    try ResponseHead(parsing: Array(("HTTP/1.1 200 OK\r\n" + lines.joined(separator: "\r\n")).utf8))
  }

  static func freshness(_ rules: FreshnessRules = FreshnessRules(), _ lines: String...) throws
    -> Freshness
  {
    let head = try ResponseHead(
      parsing: Array(("HTTP/1.1 200 OK\r\n" + lines.joined(separator: "\r\n")).utf8))
    return rules.freshness(of: head, requestTime: now, responseTime: now)
  }

  @Test("directives: ages, flags, quoted arguments, duplicates keep the stricter value")
  func directives() {
    let parsed = CacheDirectives(values: [
      "Max-Age=600, s-maxage=\"30\", no-cache=\"set-cookie\"",
      "max-age=60, private, proxy-revalidate",
      "stale-while-revalidate=10, stale-if-error=abc, unknown=1",
    ])
    #expect(parsed.maxAge == 60 && parsed.sharedMaxAge == 30)
    #expect(parsed.noCache && parsed.isPrivate && parsed.mustRevalidate && !parsed.noStore)
    #expect(parsed.staleWhileRevalidate == 10 && parsed.staleIfError == nil)
    // A malformed max-age means stale, not absent (RFC 9111, section 4.2.1).
    #expect(CacheDirectives(values: ["max-age=soon"]).maxAge == 0)
    #expect(CacheDirectives(values: ["max-age=99999999999999"]).maxAge == 2_147_483_648)
    #expect(CacheDirectives(values: ["no-store"]).noStore)
  }

  @Test(
    "lifetime: s-maxage over max-age over Expires over the default; Age and the Date skew count")
  func lifetime() throws {
    #expect(
      try Self.freshness(FreshnessRules(), "Cache-Control: max-age=60, s-maxage=20").freshUntil
        == Self.now + 20)
    #expect(
      try Self.freshness(FreshnessRules(), "Cache-Control: max-age=60").freshUntil == Self.now + 60)
    #expect(
      try Self.freshness(FreshnessRules(), "Cache-Control: max-age=60", "Age: 45").freshUntil
        == Self.now + 15)
    #expect(
      try Self.freshness(FreshnessRules(), "Cache-Control: max-age=60", "Age: 600").freshUntil
        == Self.now)
    let date = HTTPDate.format(Self.now - 10)
    let expires = HTTPDate.format(Self.now + 50)
    // Expires is judged against the origin's Date: 60 s of lifetime, 10 of them spent.
    #expect(
      try Self.freshness(FreshnessRules(), "Date: \(date)", "Expires: \(expires)").freshUntil
        == Self.now + 50)
    #expect(try Self.freshness(FreshnessRules(), "Expires: 0").freshUntil == Self.now)
    #expect(try Self.freshness(FreshnessRules(defaultTTL: 77)).freshUntil == Self.now + 77)
    #expect(
      try Self.freshness(FreshnessRules(), "Age: nan", "Cache-Control: max-age=5").freshUntil
        == Self.now + 5)
  }

  @Test("bounds: min and max TTL clamp, but no-cache, no-store and must-revalidate win")
  func bounds() throws {
    let rules = FreshnessRules(
      minTTL: 30, maxTTL: 3600, staleWhileRevalidate: 20, staleIfError: 600)
    #expect(try Self.freshness(rules, "Cache-Control: max-age=1").lifetime == 30)
    #expect(try Self.freshness(rules, "Cache-Control: max-age=999999").lifetime == 3600)
    let revalidate = try Self.freshness(rules, "Cache-Control: max-age=1, must-revalidate")
    #expect(
      revalidate.lifetime == 1 && revalidate.staleIfError == 0
        && revalidate.staleWhileRevalidate == 0)
    #expect(try Self.freshness(rules, "Cache-Control: no-cache, max-age=600").lifetime == 0)
    let noStore = try Self.freshness(rules, "Cache-Control: no-store")
    #expect(noStore.noStore && !noStore.mayStore && noStore.lifetime == 0)
    // The origin's own stale allowances win when shorter; the configured ones cap them.
    let stale = try Self.freshness(
      rules, "Cache-Control: max-age=60, stale-if-error=5, stale-while-revalidate=99")
    #expect(stale.staleIfError == 5 && stale.staleWhileRevalidate == 20)
    #expect(try Self.freshness(rules, "Cache-Control: private, max-age=60").isPrivate)
  }

  @Test(
    "a version round-trips through its stored bytes, and no truncation or extra byte decodes to the whole"
  )
  func versionCoding() {
    let versions = [
      SourceVersion.unversioned(digest: 7),
      SourceVersion(
        validator: .file(
          FileStamp(
            device: 2049, inode: 123_456, size: 99, modifiedNanoseconds: 1_700_000_000_123_456_789,
            changedNanoseconds: -5)), digest: .max,
        freshness: FreshnessRules().fileFreshness, lastModified: 1_700_000_000.5),
      SourceVersion(
        validator: .http(etag: "\"abc\"", lastModified: nil), digest: 1,
        freshness: Freshness(
          freshUntil: Self.now, lifetime: 60, staleWhileRevalidate: 1, staleIfError: 2,
          noStore: false, isPrivate: true)),
    ]
    for version in versions {
      let bytes = PipelineFuzzing.encodeSourceVersion(version)
      let decoded = PipelineFuzzing.sourceVersion(bytes)
      #expect(decoded?.version == version && decoded?.length == bytes.count)
      for cut in 0..<bytes.count {
        #expect(PipelineFuzzing.sourceVersion(Array(bytes[..<cut])) == nil)
      }
    }
  }
}
