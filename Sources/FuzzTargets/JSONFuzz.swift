import ThumbProtocol

extension FuzzTarget {
  /// The JSON parser of session frames and config files.
  static let json = FuzzTarget(
    name: "json",
    covers: "JSONValue.parse: what parses, encoded again, parses to the same value",
    maxLength: 20_000
  ) { bytes in
    guard let value = JSONValue.parse(bytes) else { return }
    let encoded = value.encoded()
    require(JSONValue.parse(Array(encoded.utf8)) == value, "\(encoded) does not read back")
  }
}
