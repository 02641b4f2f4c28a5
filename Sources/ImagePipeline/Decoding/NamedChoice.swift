/// A closed set of names a caller spells (a request's `fit`, `format` or `colour`): parsed
/// from its raw value, and listed in one phrasing wherever a wrong name is refused (query
/// parameters, session frames, the CLI, the config file).
public protocol NamedChoice: RawRepresentable, CaseIterable, Sendable where RawValue == String {
  /// The cases in the order a message lists them (by default, as declared).
  static var listed: [Self] { get }
}

extension NamedChoice {
  /// The cases as declared.
  public static var listed: [Self] { Array(allCases) }

  /// "a, b or c", from `listed`.
  public static var names: String {
    let names = listed.map(\.rawValue)
    guard let last = names.last else { return "" }
    return names.count == 1 ? last : names.dropLast().joined(separator: ", ") + " or " + last
  }
}
