import ImagePipeline

/// The written formats a client says it can show beyond JPEG and PNG (which every client
/// shows), read from an HTTP `Accept` header: on each `/v1/thumbnail` request, and once for a
/// session, from its upgrade request.
///
/// Only an explicit `image/webp` or `image/avif` with a non-zero quality counts. Wildcards do
/// not: `*/*` and `image/*` are what clients send whatever they can decode, and serving WebP
/// to every `*/*` is the bug peers' trackers report most.
public struct AcceptedFormats: Sendable, Hashable {
  /// `image/webp` was named.
  public var webp: Bool
  /// `image/avif` was named.
  public var avif: Bool

  /// JPEG and PNG only.
  public static let basic = AcceptedFormats(webp: false, avif: false)

  /// The formats given.
  public init(webp: Bool, avif: Bool) {
    self.webp = webp
    self.avif = avif
  }

  /// The formats an `Accept` header names (nil: JPEG and PNG only). Pure, and it allocates
  /// nothing: browsers send `Accept` on every request, memory hits included. Bounded by the
  /// header, which the HTTP parser has already bounded.
  public init(acceptHeader: String?) {
    self = .basic
    if let header = acceptHeader { read(header) }
  }

  /// The request header `init(acceptOf:)` reads (for `Route.reads`).
  static let reads: Set<String> = ["accept"]

  /// The formats every `Accept` field of `request` names together: a field may be sent on
  /// several lines, which mean one comma-separated list (RFC 9110, section 5.3).
  public init(acceptOf request: HTTPRequest) {
    self = .basic
    for field in request.headers where field.name == "accept" { read(field.value) }
  }

  private mutating func read(_ value: String) {
    var header = value
    header.withUTF8 { bytes in
      var start = 0
      while start < bytes.count {
        var end = start
        while end < bytes.count && bytes[end] != UInt8(ascii: ",") { end += 1 }
        note(UnsafeBufferPointer(rebasing: bytes[start..<end]))
        start = end + 1
      }
    }
  }

  /// One media range: `type/subtype` and its parameters, `q=0` meaning not acceptable.
  private mutating func note(_ range: UnsafeBufferPointer<UInt8>) {
    var typeEnd = 0
    while typeEnd < range.count && range[typeEnd] != UInt8(ascii: ";") { typeEnd += 1 }
    let type = Self.trimmed(range, 0, typeEnd)
    let isWebP = Self.equalsLowercased(range, type, "image/webp")
    guard isWebP || Self.equalsLowercased(range, type, "image/avif") else { return }
    // Parameters: a q whose digits are all zero (0, 0.0, 0.000) refuses the type.
    var at = typeEnd
    while at < range.count {
      var next = at + 1
      while next < range.count && range[next] != UInt8(ascii: ";") { next += 1 }
      let parameter = Self.trimmed(range, at + 1, next)
      if parameter.count >= 2, range[parameter.lowerBound] | 0x20 == UInt8(ascii: "q"),
        range[parameter.lowerBound + 1] == UInt8(ascii: "=")
      {
        let value = (parameter.lowerBound + 2)..<parameter.upperBound
        if !value.contains(where: {
          range[$0] >= UInt8(ascii: "1") && range[$0] <= UInt8(ascii: "9")
        }) {
          return
        }
      }
      at = next
    }
    if isWebP { webp = true } else { avif = true }
  }

  /// `from..<to` without surrounding spaces and tabs.
  private static func trimmed(_ bytes: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int)
    -> Range<Int>
  {
    var (low, high) = (from, to)
    while low < high && (bytes[low] == 0x20 || bytes[low] == 0x09) { low += 1 }
    while high > low && (bytes[high - 1] == 0x20 || bytes[high - 1] == 0x09) { high -= 1 }
    return low..<high
  }

  /// Whether `bytes[range]` is `word` (lower-case ASCII) in any case.
  private static func equalsLowercased(
    _ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ word: StaticString
  ) -> Bool {
    guard range.count == word.utf8CodeUnitCount else { return false }
    let letters = word.utf8Start
    for (i, at) in range.enumerated() {
      let byte = bytes[at]
      let lowered = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
      if lowered != letters[i] { return false }
    }
    return true
  }
}

/// How `format=auto` becomes a written format: AVIF when the client accepts it and the
/// configuration enables it (`auto_avif`), else WebP when accepted, else `auto` itself (PNG
/// for alpha, JPEG otherwise, decided once the pixels are known). The result, never the raw
/// `Accept` header, is part of the cache key, so any number of distinct headers make at most
/// three entries for `auto` (plus one per explicitly named format).
public enum FormatNegotiation {
  /// The format to make for `requested` when the client accepts `accepted`.
  public static func resolve(
    _ requested: OutputFormat, accepted: AcceptedFormats, avifEnabled: Bool
  ) -> OutputFormat {
    guard requested == .auto else { return requested }
    if accepted.avif && avifEnabled { return .avif }
    if accepted.webp { return .webp }
    return .auto
  }
}
