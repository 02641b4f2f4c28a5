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

  /// The formats an `Accept` header names (nil: JPEG and PNG only). Pure; bounded by the
  /// header, which the HTTP parser has already bounded.
  public init(acceptHeader: String?) {
    self = .basic
    guard let acceptHeader else { return }
    for range in acceptHeader.utf8.split(separator: UInt8(ascii: ",")) {
      let parts = range.split(separator: UInt8(ascii: ";"))
      guard let type = parts.first else { continue }
      let name = Self.lowercasedTrimmed(type)
      guard name == "image/webp" || name == "image/avif" else { continue }
      var weight = 1.0
      for parameter in parts.dropFirst() {
        let text = Self.lowercasedTrimmed(parameter)
        if text.hasPrefix("q="), let value = Double(text.dropFirst(2)) { weight = value }
      }
      guard weight > 0 else { continue }
      if name == "image/webp" { webp = true } else { avif = true }
    }
  }

  private static func lowercasedTrimmed(_ bytes: Substring.UTF8View.SubSequence) -> String {
    let isSpace: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
    let trimmed = bytes.drop(while: isSpace).reversed().drop(while: isSpace).reversed()
    return String(decoding: trimmed, as: UTF8.self).lowercased()
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
