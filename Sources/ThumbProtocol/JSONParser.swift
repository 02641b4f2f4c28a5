/// A strict JSON parser over bytes (RFC 8259): what session frames, error bodies and the
/// config file need, without Foundation. JSONSerialization plus the bridging of every value
/// cost about 8 ms of the event loop for a frame of 125 prefetch items; this does the same in a
/// small fraction of that, so a client announcing thousands of items cannot stall the loop
/// that answers everyone's memory hits.
///
/// Integers without fraction or exponent that fit in `Int` are `.integer`; other numbers are
/// `.number`. Strings must be valid UTF-8 with no raw control characters; escapes include
/// surrogate pairs (a lone surrogate is an error). A duplicate key keeps its last value.
/// Nesting deeper than `maxDepth` is refused rather than recursed into.
struct JSONParser {
  static let maxDepth = 256

  private let bytes: [UInt8]
  private var index = 0

  private init(_ bytes: [UInt8]) { self.bytes = bytes }

  /// The value of `bytes`, which must be one JSON value with optional whitespace around it.
  static func parse(_ bytes: some Collection<UInt8>) -> JSONValue? {
    var parser = JSONParser(Array(bytes))
    guard let value = parser.value(depth: 0) else { return nil }
    parser.skipWhitespace()
    return parser.index == parser.bytes.count ? value : nil
  }

  private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

  private mutating func skipWhitespace() {
    while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
      index += 1
    }
  }

  private mutating func literal(_ word: String, _ value: JSONValue) -> JSONValue? {
    let expected = Array(word.utf8)
    guard index + expected.count <= bytes.count,
      bytes[index..<(index + expected.count)].elementsEqual(expected)
    else { return nil }
    index += expected.count
    return value
  }

  private mutating func value(depth: Int) -> JSONValue? {
    skipWhitespace()
    guard let byte = current else { return nil }
    switch byte {
    case UInt8(ascii: "{"): return depth < Self.maxDepth ? object(depth: depth + 1) : nil
    case UInt8(ascii: "["): return depth < Self.maxDepth ? array(depth: depth + 1) : nil
    case UInt8(ascii: "\""): return string().map(JSONValue.string)
    case UInt8(ascii: "t"): return literal("true", .bool(true))
    case UInt8(ascii: "f"): return literal("false", .bool(false))
    case UInt8(ascii: "n"): return literal("null", .null)
    default: return number()
    }
  }

  private mutating func object(depth: Int) -> JSONValue? {
    var fields: [String: JSONValue] = [:]
    let closed = elements(closing: UInt8(ascii: "}")) { parser in
      parser.skipWhitespace()
      guard parser.current == UInt8(ascii: "\""), let key = parser.string() else { return false }
      parser.skipWhitespace()
      guard parser.current == UInt8(ascii: ":") else { return false }
      parser.index += 1
      guard let element = parser.value(depth: depth) else { return false }
      fields[key] = element
      return true
    }
    return closed ? .object(fields) : nil
  }

  private mutating func array(depth: Int) -> JSONValue? {
    var elements: [JSONValue] = []
    let closed = self.elements(closing: UInt8(ascii: "]")) { parser in
      guard let element = parser.value(depth: depth) else { return false }
      elements.append(element)
      return true
    }
    return closed ? .array(elements) : nil
  }

  /// The elements of an object or an array, from its opening byte: `element` reads one;
  /// then `,` goes on and `closing` ends it. False when anything else comes.
  private mutating func elements(closing: UInt8, _ element: (inout Self) -> Bool) -> Bool {
    index += 1
    skipWhitespace()
    if current == closing {
      index += 1
      return true
    }
    while true {
      guard element(&self) else { return false }
      skipWhitespace()
      switch current {
      case UInt8(ascii: ","): index += 1
      case closing:
        index += 1
        return true
      default: return false
      }
    }
  }

  /// A string literal starting at the opening quote.
  private mutating func string() -> String? {
    index += 1  // "
    let start = index
    // Fast path: no escapes, so the bytes between the quotes are the string.
    while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
      guard byte >= 0x20 else { return nil }
      index += 1
    }
    guard let stop = current else { return nil }
    if stop == UInt8(ascii: "\"") {
      index += 1
      return String(validating: bytes[start..<(index - 1)], as: UTF8.self)
    }
    var scalars = Array(bytes[start..<index])
    while let byte = current {
      index += 1
      switch byte {
      case UInt8(ascii: "\""):
        return String(validating: scalars, as: UTF8.self)
      case UInt8(ascii: "\\"):
        guard let escaped = current else { return nil }
        index += 1
        switch escaped {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escaped)
        case UInt8(ascii: "b"): scalars.append(0x08)
        case UInt8(ascii: "f"): scalars.append(0x0C)
        case UInt8(ascii: "n"): scalars.append(0x0A)
        case UInt8(ascii: "r"): scalars.append(0x0D)
        case UInt8(ascii: "t"): scalars.append(0x09)
        case UInt8(ascii: "u"):
          guard let scalar = unicodeEscape() else { return nil }
          scalars.append(contentsOf: Array(String(Character(scalar)).utf8))
        default: return nil
        }
      default:
        guard byte >= 0x20 else { return nil }
        scalars.append(byte)
      }
    }
    return nil
  }

  /// After `\u`: four hex digits, and a second `\uXXXX` for a surrogate pair.
  private mutating func unicodeEscape() -> Unicode.Scalar? {
    guard let high = hex4() else { return nil }
    if (0xD800...0xDBFF).contains(high) {
      guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
        bytes[index + 1] == UInt8(ascii: "u")
      else { return nil }
      index += 2
      guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
      return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    }
    return Unicode.Scalar(high)  // nil for a lone low surrogate
  }

  private mutating func hex4() -> UInt32? {
    guard index + 4 <= bytes.count else { return nil }
    var value: UInt32 = 0
    for _ in 0..<4 {
      let byte = bytes[index]
      let digit: UInt8
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
      default: return nil
      }
      value = value << 4 | UInt32(digit)
      index += 1
    }
    return value
  }

  private mutating func number() -> JSONValue? {
    let start = index
    func digits() -> Int {
      let from = index
      while let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
        index += 1
      }
      return index - from
    }
    if current == UInt8(ascii: "-") { index += 1 }
    let integerStart = index
    guard digits() > 0 else { return nil }
    // No leading zeros: "0" alone, or a non-zero first digit.
    if bytes[integerStart] == UInt8(ascii: "0") && index - integerStart > 1 { return nil }
    var whole = true
    if current == UInt8(ascii: ".") {
      index += 1
      guard digits() > 0 else { return nil }
      whole = false
    }
    if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
      index += 1
      if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
      guard digits() > 0 else { return nil }
      whole = false
    }
    let text = String(decoding: bytes[start..<index], as: UTF8.self)
    if whole, let integer = Int(text) { return .integer(integer) }
    // 1e999 is valid JSON text but no double: refused, not read as infinity (which no JSON
    // text can say back; found by fuzzing).
    guard let number = Double(text), number.isFinite else { return nil }
    return .number(number)
  }
}
