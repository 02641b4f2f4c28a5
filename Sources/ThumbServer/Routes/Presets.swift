/// Named option sets from config (`presets`), in imgproxy's form: `NAME=OPTION/OPTION`, such
/// as `card=rs:fill:400:300/q:75`. A request names them (`preset=card` in the query form,
/// `pr:card` in the path form) instead of spelling the options; `default`, when defined,
/// applies to every request first. With `only` (`presets_only`), nothing but presets may
/// shape an image, so the variants a client can ask for are the ones configured.
public struct Presets: Sendable, Hashable {
  /// Each preset's option segments, checked when the set was made.
  private let table: [String: [String]]
  /// Whether options other than presets are refused (`presets_only`).
  public let only: Bool

  /// No presets, raw options allowed.
  public static let none = Presets(table: [:], only: false)

  /// The longest definition, and the most definitions, taken.
  static let maxDefinitionBytes = 4096
  static let maxPresets = 1000

  private init(table: [String: [String]], only: Bool) {
    self.table = table
    self.only = only
  }

  /// Reads `definitions` (`NAME=OPTIONS`), checking every option now so a request can never
  /// meet a broken preset; the error names the definition.
  public init(definitions: [String], only: Bool) throws(PresetError) {
    guard definitions.count <= Self.maxPresets else {
      throw PresetError("at most \(Self.maxPresets) presets")
    }
    var table: [String: [String]] = [:]
    for definition in definitions {
      guard definition.utf8.count <= Self.maxDefinitionBytes,
        let equals = definition.firstIndex(of: "=")
      else { throw PresetError("'\(definition.prefix(64))' is not NAME=OPTIONS") }
      let name = String(definition[..<equals])
      guard Self.isName(name[...]) else {
        throw PresetError("preset name '\(name.prefix(64))' must be letters, digits, - or _")
      }
      guard table[name] == nil else { throw PresetError("preset '\(name)' is defined twice") }
      let segments = definition[definition.index(after: equals)...].split(separator: "/").map(
        String.init)
      var probe = ImageOptions()
      for segment in segments {
        if let problem = ImgproxyPath.apply(segment[...], to: &probe, presets: nil) {
          throw PresetError("preset '\(name)': \(problem.message)")
        }
      }
      table[name] = segments
    }
    guard !only || !table.isEmpty else {
      throw PresetError("presets_only needs at least one preset")
    }
    self.init(table: table, only: only)
  }

  /// Whether any preset is defined.
  public var isEmpty: Bool { table.isEmpty }

  /// Applies the `default` preset, if defined.
  func applyDefault(to options: inout ImageOptions) {
    for segment in table["default"] ?? [] {
      _ = ImgproxyPath.apply(segment[...], to: &options, presets: nil)
    }
  }

  /// Applies the presets `names` lists (`a:b`), in order; the problem when one is unknown.
  func apply(names: Substring, to options: inout ImageOptions) -> ParameterError? {
    let list = names.split(separator: ":", omittingEmptySubsequences: false)
    guard list.count <= 16 else { return ParameterError("at most 16 presets in one request") }
    for name in list {
      guard let segments = table[String(name)] else {
        return ParameterError("preset '\(name.prefix(64))' is not defined")
      }
      for segment in segments {
        _ = ImgproxyPath.apply(segment[...], to: &options, presets: nil)
      }
    }
    return nil
  }

  private static func isName(_ name: Substring) -> Bool {
    !name.isEmpty && name.utf8.count <= 64
      && name.utf8.allSatisfy { byte in
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
          || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
          || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-")
          || byte == UInt8(ascii: "_")
      }
  }
}

/// A preset definition that cannot be used, naming it.
public struct PresetError: Error, CustomStringConvertible, Sendable {
  /// What is wrong.
  public let description: String
  init(_ description: String) { self.description = description }
}
