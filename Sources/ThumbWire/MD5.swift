#if canImport(Glibc)
  import Glibc
#endif

/// MD5 (RFC 1321), for the one place a format requires it: the freedesktop thumbnail cache
/// names a thumbnail by the MD5 of its source's URI. Not used for anything that needs a secure
/// hash.
public enum MD5 {
  /// The 16-byte digest of `message`.
  public static func digest(_ message: some Collection<UInt8>) -> [UInt8] {
    var state: (UInt32, UInt32, UInt32, UInt32) = (
      0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476
    )
    var padded = Array(message)
    let bitLength = UInt64(padded.count) &* 8
    padded.append(0x80)
    while padded.count % 64 != 56 { padded.append(0) }
    for index in 0..<8 { padded.append(UInt8(truncatingIfNeeded: bitLength >> (8 * index))) }
    var words = [UInt32](repeating: 0, count: 16)
    for block in stride(from: 0, to: padded.count, by: 64) {
      for index in 0..<16 {
        let at = block + index * 4
        words[index] =
          UInt32(padded[at]) | UInt32(padded[at + 1]) << 8 | UInt32(padded[at + 2]) << 16
          | UInt32(padded[at + 3]) << 24
      }
      var (a, b, c, d) = state
      for round in 0..<64 {
        var f: UInt32
        var g: Int
        switch round {
        case 0..<16:
          f = (b & c) | (~b & d)
          g = round
        case 16..<32:
          f = (d & b) | (~d & c)
          g = (5 &* round &+ 1) % 16
        case 32..<48:
          f = b ^ c ^ d
          g = (3 &* round &+ 5) % 16
        default:
          f = c ^ (b | ~d)
          g = (7 &* round) % 16
        }
        f = f &+ a &+ constants[round] &+ words[g]
        a = d
        d = c
        c = b
        b = b &+ ((f << shifts[round]) | (f >> (32 - shifts[round])))
      }
      state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d)
    }
    var out: [UInt8] = []
    for word in [state.0, state.1, state.2, state.3] {
      for index in 0..<4 { out.append(UInt8(truncatingIfNeeded: word >> (8 * index))) }
    }
    return out
  }

  /// The digest in lowercase hexadecimal, as the thumbnail cache names files.
  public static func hex(_ message: some Collection<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for byte in digest(message) { out += [digits[Int(byte >> 4)], digits[Int(byte & 15)]] }
    return String(decoding: out, as: UTF8.self)
  }

  private static let shifts: [UInt32] =
    [7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22]
    + [5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20]
    + [4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23]
    + [6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21]

  /// floor(abs(sin(i + 1)) * 2^32), as the RFC tabulates them.
  private static let constants: [UInt32] = (0..<64).map { index in
    UInt32(truncatingIfNeeded: Int64((abs(sin(Double(index + 1))) * 4_294_967_296).rounded(.down)))
  }
}
