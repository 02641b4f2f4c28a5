/// A JSON value, enough for protocol headers: no floating-point surprises for integers, keys
/// written in a stable order.
public enum JSONValue: Sendable, Hashable {
  case string(String)
  case integer(Int)
  case number(Double)
  case bool(Bool)
  case null
  case array([JSONValue])
  case object([String: JSONValue])

  /// The string, if this is one.
  public var string: String? {
    if case .string(let value) = self { return value }
    return nil
  }

  /// The integer, if this is a whole number.
  public var integer: Int? {
    switch self {
    case .integer(let value): return value
    default: return nil
    }
  }

  /// The number, integer or not.
  public var number: Double? {
    switch self {
    case .integer(let value): return Double(value)
    case .number(let value): return value
    default: return nil
    }
  }

  /// A number as JSON: a whole one as an integer (`2`, not `2.0`), anything else (1e300, NaN,
  /// which a server refuses) as a number, never trapping in the conversion.
  public static func wholeOrNumber(_ value: Double) -> JSONValue {
    value == value.rounded() && abs(value) < 0x1p53 ? .integer(Int(value)) : .number(value)
  }

  /// Compact JSON text; object keys sorted, with `op` first so frames read well in traces.
  public func encoded() -> String {
    switch self {
    case .string(let value): return Self.quote(value)
    case .integer(let value): return String(value)
    case .number(let value): return value.isFinite ? "\(value)" : "null"
    case .bool(let value): return value ? "true" : "false"
    case .null: return "null"
    case .array(let values): return "[" + values.map { $0.encoded() }.joined(separator: ",") + "]"
    case .object(let fields):
      let keys = fields.keys.sorted { ($0 == "op" ? 0 : 1, $0) < ($1 == "op" ? 0 : 1, $1) }
      return "{" + keys.map { Self.quote($0) + ":" + fields[$0]!.encoded() }.joined(separator: ",")
        + "}"
    }
  }

  /// Parses JSON text; nil unless it is valid JSON (see `JSONParser`).
  public static func parse(_ bytes: some Collection<UInt8>) -> JSONValue? {
    JSONParser.parse(bytes)
  }

  /// `text` as a JSON string literal, quotes included.
  public static func quote(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      default:
        if scalar.value < 0x20 {
          let hex = String(scalar.value, radix: 16)
          out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        } else {
          out.unicodeScalars.append(scalar)
        }
      }
    }
    return out + "\""
  }
}
