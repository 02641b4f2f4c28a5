/// How long a source stays fresh: RFC 9111's computation from an origin's answer, inside the
/// bounds an operator configures. Pure: the clock is a parameter.
public struct FreshnessRules: Sendable, Hashable {
  /// Lifetime of a source whose origin sends no freshness (no `max-age`, `s-maxage` or
  /// `Expires`), and of `file://` sources as advertised downstream. Five minutes by default:
  /// long enough that a scrolling list revalidates each image rarely, short enough that a
  /// change reaches every client within a coffee break.
  public var defaultTTL: Double
  /// Lifetimes the origin gives are raised to at least this, unless it sent `no-cache`,
  /// `must-revalidate` or `no-store` (then its word wins). 0 by default: `max-age` as sent.
  public var minTTL: Double
  /// No lifetime is longer: an origin's `max-age=31536000` still gets asked within this.
  public var maxTTL: Double
  /// Seconds a stale source may be served while one revalidation runs. The origin's own
  /// `stale-while-revalidate` wins when it is shorter; `must-revalidate` and `no-cache` make
  /// it 0. 0 by default.
  public var staleWhileRevalidate: Double
  /// Seconds a stale source may be served when its origin fails or times out. The origin's own
  /// `stale-if-error` wins when it is shorter; `must-revalidate` and `no-cache` make it 0.
  /// 0 by default: a dead origin is an error.
  public var staleIfError: Double

  /// Creates rules; every value is in seconds.
  public init(
    defaultTTL: Double = 300, minTTL: Double = 0, maxTTL: Double = 7 * 86_400,
    staleWhileRevalidate: Double = 0, staleIfError: Double = 0
  ) {
    self.defaultTTL = defaultTTL
    self.minTTL = minTTL
    self.maxTTL = maxTTL
    self.staleWhileRevalidate = staleWhileRevalidate
    self.staleIfError = staleIfError
  }

  /// The freshness of a response whose request was sent at `requestTime` and whose head
  /// arrived at `responseTime` (seconds since 1970), from its `Cache-Control`, `Expires`,
  /// `Date` and `Age` (RFC 9111, sections 4.2.1 and 4.2.3).
  public func freshness(of head: ResponseHead, requestTime: Double, responseTime: Double)
    -> Freshness
  {
    let directives = CacheDirectives(
      values: head.fields.filter { $0.name == "cache-control" }.map(\.value))
    let date = head.value("date").flatMap(HTTPDate.parse)
    var lifetime: Double
    if let shared = directives.sharedMaxAge {
      lifetime = shared
    } else if let maxAge = directives.maxAge {
      lifetime = maxAge
    } else if let expiresText = head.value("expires") {
      // An invalid Expires (such as "0") means already expired.
      lifetime = HTTPDate.parse(expiresText).map { max(0, $0 - (date ?? responseTime)) } ?? 0
    } else {
      lifetime = defaultTTL
    }
    let strict = directives.noCache || directives.mustRevalidate || directives.noStore
    if directives.noCache || directives.noStore { lifetime = 0 }
    if !strict { lifetime = max(lifetime, minTTL) }
    lifetime = min(max(0, lifetime), maxTTL)
    // Age already spent upstream and on the way (section 4.2.3).
    let age = head.value("age").flatMap(Self.deltaSeconds) ?? 0
    let apparentAge = max(0, responseTime - (date ?? responseTime))
    let initialAge = max(apparentAge, age + max(0, responseTime - requestTime))
    func allowance(_ configured: Double, _ origin: Double?) -> Double {
      strict ? 0 : min(configured, origin ?? configured)
    }
    return Freshness(
      freshUntil: responseTime + lifetime - min(initialAge, lifetime), lifetime: lifetime,
      staleWhileRevalidate: allowance(staleWhileRevalidate, directives.staleWhileRevalidate),
      staleIfError: allowance(staleIfError, directives.staleIfError),
      noStore: directives.noStore, isPrivate: directives.isPrivate)
  }

  /// `Age`'s delta-seconds: digits only (a lenient reader would take "nan" or "inf").
  static func deltaSeconds(_ text: String) -> Double? {
    guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
    return text.utf8.count <= 10 ? Double(text) : CacheDirectives.maxSeconds
  }

  /// The freshness of a file source: checked by `stat` on every request, so never stale;
  /// `defaultTTL` is what responses advertise downstream.
  public var fileFreshness: Freshness {
    Freshness(freshUntil: .infinity, lifetime: defaultTTL)
  }
}
