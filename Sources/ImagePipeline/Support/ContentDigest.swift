/// A fast 64-bit content digest: four independent lanes of 32 bytes per step (so the
/// multiplier never waits on the previous word), folded together with the length, the
/// remaining words and bytes, then a final avalanche. Not cryptographic; it tells thumbnails
/// and source versions apart, where a collision would need two different contents for the
/// same request. Fixed constants, so a digest is the same in every process and after restarts.
enum ContentDigest {
  static func of(_ bytes: [UInt8]) -> UInt64 {
    bytes.withUnsafeBytes { raw in
      @inline(__always) func word(_ offset: Int) -> UInt64 {
        UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
      }
      var a: UInt64 = 0x243F_6A88_85A3_08D3
      var b: UInt64 = 0x1319_8A2E_0370_7344
      var c: UInt64 = 0xA409_3822_299F_31D0
      var d: UInt64 = 0x082E_FA98_EC4E_6C89
      let blocks = raw.count / 32
      for block in 0..<blocks {
        let base = block * 32
        a = lane(a, word(base))
        b = lane(b, word(base + 8))
        c = lane(c, word(base + 16))
        d = lane(d, word(base + 24))
      }
      var hash = mix(a) ^ rotate(mix(b), 16) ^ rotate(mix(c), 32) ^ rotate(mix(d), 48)
      hash ^= 0x9E37_79B9_7F4A_7C15 &* UInt64(raw.count)
      var offset = blocks * 32
      while offset + 8 <= raw.count {
        hash = (hash ^ mix(word(offset))) &* 0xFF51_AFD7_ED55_8CCD
        hash ^= hash >> 32
        offset += 8
      }
      var tail: UInt64 = 0
      while offset < raw.count {
        tail = (tail << 8) | UInt64(raw[offset])
        offset += 1
      }
      return mix((hash ^ mix(tail)) &* 0xC4CE_B9FE_1A85_EC53)
    }
  }

  /// One lane's step: the word weighted in, rotated, multiplied again.
  @inline(__always)
  private static func lane(_ accumulator: UInt64, _ word: UInt64) -> UInt64 {
    rotate(accumulator &+ word &* 0xC2B2_AE3D_27D4_EB4F, 29) &* 0x9E37_79B9_7F4A_7C15
  }

  @inline(__always)
  private static func rotate(_ value: UInt64, _ count: UInt64) -> UInt64 {
    (value << count) | (value >> (64 - count))
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
