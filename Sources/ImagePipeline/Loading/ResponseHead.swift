import ThumbWire

/// A response's status and header fields (`ThumbWire.ResponseHead`): the fetcher reads
/// origins with it, and `FreshnessRules` reads freshness from it. It lives beside the other
/// HTTP grammar so that the plain-HTTP client (`HTTPRoundTrip`) reads heads with it too.
public typealias ResponseHead = ThumbWire.ResponseHead

/// HTTP dates (RFC 9110, section 5.6.7): parsed in all three forms, written in the IMF form.
public typealias HTTPDate = ThumbWire.HTTPDate
