import ThumbSystem
import ThumbWire

/// The directives of `Cache-Control` fields that decide freshness (RFC 9111, section 5.2.2,
/// and RFC 5861's two stale extensions). Pure: parsed from the field values alone, unit-tested
/// and fuzzed.
///
/// Unknown directives are ignored, as the RFC asks. A directive given twice keeps its
/// strictest value (the smaller age), so a duplicated field cannot lengthen freshness.
/// Arguments are decimal seconds; a malformed one makes its directive count as absent,
/// except `max-age` and `s-maxage`, which then mean 0 (stale), as section 4.2.1 advises.
public struct CacheDirectives: Sendable, Hashable {
  /// `max-age`.
  public var maxAge: Double?
  /// `s-maxage`, which wins over `max-age` in a shared cache like thumbd.
  public var sharedMaxAge: Double?
  /// `no-cache` (with or without field names): revalidate before every use.
  public var noCache = false
  /// `no-store`.
  public var noStore = false
  /// `private` (with or without field names).
  public var isPrivate = false
  /// `must-revalidate` or `proxy-revalidate`: never serve it stale.
  public var mustRevalidate = false
  /// `stale-while-revalidate`.
  public var staleWhileRevalidate: Double?
  /// `stale-if-error`.
  public var staleIfError: Double?

  /// Longest field value read; the rest is ignored (a head is capped anyway).
  static let maxLength = 4096
  /// Ages above this are this (RFC 9111, section 1.2.2: 2^31 seconds).
  static let maxSeconds = 2_147_483_648.0

  /// No directives.
  public init() {}

  /// Parses the values of every `Cache-Control` field of a message, in order.
  public init(values: [String]) {
    for value in values {
      for item in Self.items(of: String(value.utf8.prefix(Self.maxLength)) ?? "") {
        apply(name: item.name, argument: item.argument)
      }
    }
  }

  private mutating func apply(name: String, argument: String?) {
    switch name {
    case "max-age": maxAge = Self.stricter(maxAge, Self.seconds(argument) ?? 0)
    case "s-maxage": sharedMaxAge = Self.stricter(sharedMaxAge, Self.seconds(argument) ?? 0)
    case "no-cache": noCache = true
    case "no-store": noStore = true
    case "private": isPrivate = true
    case "must-revalidate", "proxy-revalidate": mustRevalidate = true
    case "stale-while-revalidate":
      if let seconds = Self.seconds(argument) {
        staleWhileRevalidate = Self.stricter(staleWhileRevalidate, seconds)
      }
    case "stale-if-error":
      if let seconds = Self.seconds(argument) {
        staleIfError = Self.stricter(staleIfError, seconds)
      }
    default: break
    }
  }

  private static func stricter(_ old: Double?, _ new: Double) -> Double {
    old.map { min($0, new) } ?? new
  }

  /// delta-seconds: digits only, saturating at `maxSeconds`.
  private static func seconds(_ text: String?) -> Double? {
    guard let text, !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
      return nil
    }
    guard text.utf8.count <= 10, let value = Double(text) else { return maxSeconds }
    return min(value, maxSeconds)
  }

  /// `name[=token|"quoted"]` items separated by commas; names lower-cased.
  private static func items(of text: String) -> [(name: String, argument: String?)] {
    var items: [(String, String?)] = []
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
      while let b = bytes.first, b == 32 || b == 9 || b == 44 { bytes = bytes.dropFirst() }
      let nameEnd = bytes.firstIndex { $0 == 61 || $0 == 44 } ?? bytes.endIndex
      let name = String(String(decoding: bytes[..<nameEnd], as: UTF8.self).trimmingWhitespace())
        .lowercased()
      bytes = bytes[nameEnd...]
      var argument: String?
      if bytes.first == 61 {
        bytes = bytes.dropFirst()
        while let b = bytes.first, b == 32 || b == 9 { bytes = bytes.dropFirst() }
        if bytes.first == 34 {
          // A quoted string: backslash escapes the next byte; an unterminated one ends here.
          bytes = bytes.dropFirst()
          var value: [UInt8] = []
          while let b = bytes.first, b != 34 {
            bytes = bytes.dropFirst()
            if b == 92, let escaped = bytes.first {
              value.append(escaped)
              bytes = bytes.dropFirst()
            } else {
              value.append(b)
            }
          }
          bytes = bytes.dropFirst()
          argument = String(decoding: value, as: UTF8.self)
          let rest = bytes.firstIndex(of: 44) ?? bytes.endIndex
          bytes = bytes[rest...]
        } else {
          let end = bytes.firstIndex(of: 44) ?? bytes.endIndex
          argument = String(String(decoding: bytes[..<end], as: UTF8.self).trimmingWhitespace())
          bytes = bytes[end...]
        }
      }
      if !name.isEmpty { items.append((name, argument)) }
    }
    return items
  }
}
