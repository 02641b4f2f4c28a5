import ThumbProtocol
import ThumbSystem
import ThumbWire

/// One option's value as it arrived: typed from the JSON file, or text from a flag or an
/// environment variable. Each option parses it into its field.
public enum ConfigValue: Sendable, Hashable {
  case text(String)
  case integer(Int)
  case number(Double)
  case bool(Bool)
  case list([String])
  case other(String)

  /// Converts a value of a JSON config file.
  init(json value: JSONValue) {
    switch value {
    case .string(let text): self = .text(text)
    case .integer(let number): self = .integer(number)
    case .number(let number): self = .number(number)
    case .bool(let flag): self = .bool(flag)
    case .array(let elements):
      let texts = elements.compactMap(\.string)
      self = texts.count == elements.count ? .list(texts) : .other("an array with non-strings")
    case .null: self = .other("null")
    case .object: self = .other("an object")
    }
  }

  /// How the value reads in an error message.
  var shown: String {
    switch self {
    case .text(let text): "\"\(text)\""
    case .integer(let value): "\(value)"
    case .number(let value): "\(value)"
    case .bool(let value): "\(value)"
    case .list(let values): "[\(values.map { "\"\($0)\"" }.joined(separator: ", "))]"
    case .other(let description): description
    }
  }

  func string() -> String? {
    if case .text(let text) = self { return text }
    return nil
  }

  /// A whole number, from JSON or text.
  func integer(in range: ClosedRange<Int>) -> Int? {
    let value: Int?
    switch self {
    case .integer(let number): value = number
    case .text(let text): value = Int(text.trimmingWhitespace())
    default: value = nil
    }
    return value.flatMap { range.contains($0) ? $0 : nil }
  }

  /// A byte count: a whole number, or text with a unit (`64MiB`, `1G`, `512k`; powers of 1024).
  func byteSize() -> Int? {
    switch self {
    case .integer(let number): return number >= 0 ? number : nil
    case .text(let text): return ByteSize.parse(text)
    default: return nil
    }
  }

  /// A non-negative number of seconds.
  func seconds() -> Double? {
    let value: Double?
    switch self {
    case .integer(let number): value = Double(number)
    case .number(let number): value = number
    case .text(let text): value = Double(text.trimmingWhitespace())
    default: value = nil
    }
    return value.flatMap { $0.isFinite && $0 >= 0 && $0 <= Self.maxSeconds ? $0 : nil }
  }

  /// The longest duration a setting may name, a year: every timeout and cache lifetime is
  /// converted to whole milliseconds or nanoseconds, where 1e300 seconds would trap.
  static let maxSeconds: Double = 31_536_000

  /// true/false, also as text (`1`, `yes`, `on`...).
  func boolean() -> Bool? {
    switch self {
    case .bool(let value): return value
    case .text(let text):
      switch text.lowercased() {
      case "1", "true", "yes", "on": return true
      case "0", "false", "no", "off": return false
      default: return nil
      }
    default: return nil
    }
  }

  /// A list: a JSON array, or comma-separated text (empty text is an empty list).
  func strings() -> [String]? {
    switch self {
    case .list(let values): return values
    case .text(let text):
      return text.split(separator: ",").map { String($0.trimmingWhitespace()) }
        .filter { !$0.isEmpty }
    default: return nil
    }
  }
}
