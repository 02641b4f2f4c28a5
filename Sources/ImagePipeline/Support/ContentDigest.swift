/// A fast 64-bit content digest: eight bytes per step, then a final avalanche. Not
/// cryptographic; it tells thumbnails apart for entity tags, where a collision would need two
/// different thumbnails of the same request. Fixed constants, so the digest of a thumbnail is
/// the same in every process and after restarts.
enum ContentDigest {
  static func of(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
    bytes.withUnsafeBytes { raw in
      let words = raw.count / 8
      for index in 0..<words {
        let word = UInt64(
          littleEndian: raw.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self))
        hash = (hash ^ mix(word)) &* 0xFF51_AFD7_ED55_8CCD
        hash ^= hash >> 32
      }
      var tail: UInt64 = 0
      for offset in (words * 8)..<raw.count {
        tail = (tail << 8) | UInt64(raw[offset])
      }
      hash = (hash ^ mix(tail)) &* 0xC4CE_B9FE_1A85_EC53
    }
    return mix(hash)
  }

  /// The 64-bit finaliser of MurmurHash3: every input bit affects every output bit.
  @inline(__always)
  private static func mix(_ value: UInt64) -> UInt64 {
    var x = value
    x ^= x >> 33
    x = x &* 0xFF51_AFD7_ED55_8CCD
    x ^= x >> 33
    x = x &* 0xC4CE_B9FE_1A85_EC53
    x ^= x >> 33
    return x
  }
}
