/// Base64 (RFC 4648): URL-safe without padding, as URLs and signatures carry it, and the
/// standard alphabet with padding, as ThumbHashes travel in JSON and headers.
public enum Base64 {
  private static let alphabet = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

  /// Standard Base64 (RFC 4648 section 4) with padding.
  public static func standard(_ bytes: [UInt8]) -> String {
    var text = Array(urlSafe(bytes).utf8).map { byte -> UInt8 in
      switch byte {
      case UInt8(ascii: "-"): UInt8(ascii: "+")
      case UInt8(ascii: "_"): UInt8(ascii: "/")
      default: byte
      }
    }
    while text.count % 4 != 0 { text.append(UInt8(ascii: "=")) }
    return String(decoding: text, as: UTF8.self)
  }

  /// The bytes of standard Base64, padded or not; nil for anything else.
  public static func decodeStandard(_ text: some StringProtocol) -> [UInt8]? {
    var digits: [UInt8] = []
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "-"), UInt8(ascii: "_"): return nil
      case UInt8(ascii: "+"): digits.append(UInt8(ascii: "-"))
      case UInt8(ascii: "/"): digits.append(UInt8(ascii: "_"))
      default: digits.append(byte)
      }
    }
    return decodeURLSafe(String(decoding: digits, as: UTF8.self))
  }

  /// URL-safe Base64 (RFC 4648 section 5) without padding.
  public static func urlSafe(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var index = 0
    while index < bytes.count {
      let chunk = bytes[index..<min(index + 3, bytes.count)]
      var value = 0
      for (offset, byte) in chunk.enumerated() { value |= Int(byte) << (16 - 8 * offset) }
      for position in 0..<(chunk.count + 1) {
        out.append(alphabet[value >> (18 - 6 * position) & 63])
      }
      index += 3
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The bytes of URL-safe Base64, padded or not; nil for any other character or a length
  /// no encoding has.
  public static func decodeURLSafe(_ text: some StringProtocol) -> [UInt8]? {
    var digits = Array(text.utf8)
    while digits.last == UInt8(ascii: "=") { digits.removeLast() }
    guard digits.count % 4 != 1 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(digits.count * 3 / 4)
    var accumulator = 0
    var bits = 0
    for digit in digits {
      let value: Int
      switch digit {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = Int(digit) - 65
      case UInt8(ascii: "a")...UInt8(ascii: "z"): value = Int(digit) - 71
      case UInt8(ascii: "0")...UInt8(ascii: "9"): value = Int(digit) + 4
      case UInt8(ascii: "-"): value = 62
      case UInt8(ascii: "_"): value = 63
      default: return nil
      }
      accumulator = accumulator << 6 | value
      bits += 6
      if bits >= 8 {
        bits -= 8
        out.append(UInt8(truncatingIfNeeded: accumulator >> bits))
        accumulator &= (1 << bits) - 1
      }
    }
    return out
  }
}
