/// Reads little-endian fields from untrusted bytes (disk cache entries and the versions in
/// them); every read checks the length first.
struct ByteReader {
  let bytes: ArraySlice<UInt8>
  /// Bytes consumed so far.
  private(set) var offset = 0

  init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

  /// Bytes not read yet.
  var remaining: Int { bytes.count - offset }

  mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
    guard count >= 0, count <= bytes.count - offset else { return nil }
    let start = bytes.startIndex + offset
    offset += count
    return bytes[start..<(start + count)]
  }

  mutating func byte() -> UInt8? { take(1)?.first }

  mutating func uint16() -> UInt16? { take(2).map { UInt16($0.first!) | UInt16($0.last!) << 8 } }

  mutating func uint32() -> UInt32? {
    take(4).map { $0.enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * $1.offset) } }
  }

  mutating func uint64() -> UInt64? {
    take(8).map { $0.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * $1.offset) } }
  }

  mutating func double() -> Double? { uint64().map(Double.init(bitPattern:)) }
}
