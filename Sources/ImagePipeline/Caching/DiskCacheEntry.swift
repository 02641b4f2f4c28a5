import ThumbSystem
import ThumbWire

/// The on-disk layout of one cache entry, and the hashes that name and check it.
///
/// Layout (little-endian): magic "TDC1", key length (u32), key, metadata length (u32),
/// metadata, payload length (u64), checksum (u64, FNV-1a over key, metadata and payload),
/// payload. The full key is stored, so a file-name collision can only ever be a miss.
enum DiskCacheEntry {
  static let magic: [UInt8] = Array("TDC1".utf8)
  static let fileExtension = "tdc"

  /// A 128-bit file name for `key`: two FNV-1a variants, hex. Never derived from the raw URL.
  /// With a `group`, the name starts with the group's own 64-bit hash and a dash, so every
  /// entry of a group (all thumbnails of one source) is found by its name alone.
  static func fileName(
    for key: String, group: String? = nil, extension suffix: String = fileExtension
  ) -> String {
    let bytes = Array(key.utf8)
    return (group.map(groupPrefix) ?? "") + hex(FNV1a.hash(bytes))
      + hex(FNV1a.hash(bytes, seed: 0x84222325_CBF29CE4)) + "." + suffix
  }

  /// What the names of a group's entries start with.
  static func groupPrefix(_ group: String) -> String {
    hex(FNV1a.hash(group.utf8, seed: 0x9E37_79B9_7F4A_7C15)) + "-"
  }

  /// The group part of a file name (its prefix through the dash), nil for an entry in none.
  @Sendable static func group(ofName name: String) -> String? {
    guard let dash = name.firstIndex(of: "-") else { return nil }
    return String(name[...dash])
  }

  static func encode(key: String, metadata: [UInt8], payload: [UInt8]) -> [UInt8] {
    let keyBytes = Array(key.utf8)
    var out: [UInt8] = []
    out.reserveCapacity(32 + keyBytes.count + metadata.count + payload.count)
    out += magic
    append(UInt32(keyBytes.count), to: &out)
    out += keyBytes
    append(UInt32(metadata.count), to: &out)
    out += metadata
    append(UInt64(payload.count), to: &out)
    append(checksum(keyBytes, metadata, payload), to: &out)
    out += payload
    return out
  }

  /// What a file holds, or why it cannot be trusted.
  enum Decoded {
    case entry(metadata: [UInt8], payload: [UInt8])
    /// A valid entry for a different key (name collision).
    case otherKey
    case corrupt
  }

  static func decode(_ bytes: [UInt8], key: String) -> Decoded {
    var reader = ByteReader(bytes[...])
    guard let head = reader.take(4), head.elementsEqual(magic), let keyLength = reader.uint32(),
      let storedKey = reader.take(Int(keyLength)).map(Array.init), let metaLength = reader.uint32(),
      let metadata = reader.take(Int(metaLength)).map(Array.init),
      let payloadLength = reader.uint64(), let sum = reader.uint64(),
      payloadLength == UInt64(reader.remaining),
      let payload = reader.take(Int(payloadLength)).map(Array.init)
    else { return .corrupt }
    guard checksum(storedKey, metadata, payload) == sum else { return .corrupt }
    guard storedKey == Array(key.utf8) else { return .otherKey }
    return .entry(metadata: metadata, payload: payload)
  }

  static func checksum(_ parts: [UInt8]...) -> UInt64 {
    var hash = FNV1a()
    for part in parts { hash.combine(part) }
    return hash.value
  }

  private static func hex(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
  }

  private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { out += $0 }
  }
}
