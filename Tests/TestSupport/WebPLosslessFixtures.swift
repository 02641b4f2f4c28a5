/// Lossless WebP (VP8L) bitstreams written symbol by symbol, for the shapes that make libwebp
/// 1.2 allocate or re-read without bound: an entropy image naming tens of thousands of
/// prefix-code groups, and a header of megabytes (an entropy image coded with 15-bit codes).
/// Every pixel of the image itself is one zero-bit symbol, so the files are small where the
/// header is.
enum WebPLosslessFixtures {
  /// Bits least significant first, as VP8L stores them; prefix codes most significant first.
  struct Bits {
    var bytes: [UInt8] = []
    var count = 0

    mutating func put(_ value: UInt32, _ width: Int) {
      for shift in 0..<width { bit(value >> UInt32(shift) & 1) }
    }

    mutating func code(_ value: UInt32, length: Int) {
      for shift in stride(from: length - 1, through: 0, by: -1) { bit(value >> UInt32(shift) & 1) }
    }

    private mutating func bit(_ b: UInt32) {
      if count % 8 == 0 { bytes.append(0) }
      if b == 1 { bytes[bytes.count - 1] |= UInt8(1 << (count % 8)) }
      count += 1
    }
  }

  /// A simple prefix code of one symbol (it takes no bits to write).
  static func single(_ symbol: UInt32, into bits: inout Bits) {
    bits.put(1, 1)  // simple
    bits.put(0, 1)  // one symbol
    bits.put(1, 1)  // 8 bits wide
    bits.put(symbol, 8)
  }

  /// A normal prefix code over `alphabet` symbols whose lengths are `lengths` (0 for unused),
  /// each length written with a code-length code of 4-bit codes for 0...15.
  static func normal(_ lengths: [Int], alphabet: Int, into bits: inout Bits) {
    bits.put(0, 1)
    // All 19 code-length codes present: 0...15 with length 4, 16...18 unused.
    bits.put(19 - 4, 4)
    let order = [17, 18, 0, 1, 2, 3, 4, 5, 16, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    for symbol in order { bits.put(symbol <= 15 ? 4 : 0, 3) }
    bits.put(0, 1)  // every symbol's length follows
    for symbol in 0..<alphabet {
      let length = symbol < lengths.count ? lengths[symbol] : 0
      bits.code(UInt32(length), length: 4)  // canonical: symbols 0...15 of length 4 are 0...15
    }
  }

  /// Canonical codes for `lengths`: the value of each symbol's code.
  static func canonical(_ lengths: [Int]) -> [UInt32] {
    var codes = [UInt32](repeating: 0, count: lengths.count)
    var code: UInt32 = 0
    for length in 1...15 {
      for symbol in lengths.indices where lengths[symbol] == length {
        codes[symbol] = code
        code += 1
      }
      code <<= 1
    }
    return codes
  }

  /// A `width` x `height` lossless WebP whose entropy image (4x4 blocks) holds the pixels
  /// `entropy` gives (as red << 8 | green), with `groups` groups of one-symbol codes.
  /// `longCodes` writes each entropy pixel with 15-bit codes (a header of megabytes).
  /// With `fullGroups`, every group's five codes are normal codes that list every symbol's
  /// length (about 1 KB a group: a header of megabytes), and each pixel takes 32 bits.
  static func file(
    width: Int, height: Int, groups: Int, longCodes: Bool = false, fullGroups: Bool = false,
    entropy: (Int) -> UInt32
  ) -> [UInt8] {
    var bits = Bits()
    bits.put(0x2F, 8)
    bits.put(UInt32(width - 1), 14)
    bits.put(UInt32(height - 1), 14)
    bits.put(0, 1)  // no alpha
    bits.put(0, 3)  // version
    bits.put(0, 1)  // no transform
    bits.put(0, 1)  // no colour cache
    bits.put(1, 1)  // meta prefix codes
    bits.put(0, 3)  // 4x4 blocks
    let blocks = ((width + 3) / 4) * ((height + 3) / 4)
    // The entropy image: green and red codes over 256 symbols; blue, alpha, distance single.
    bits.put(0, 1)  // its own colour cache: none
    let lengths: [Int]
    if longCodes {
      // Lengths 1...14, then two of 15: a complete code whose symbols 14 and 15 take 15 bits.
      lengths = Array(1...14) + [15, 15]
    } else {
      lengths = [Int](repeating: 8, count: 256)
    }
    let codes = canonical(lengths)
    normal(lengths, alphabet: 280, into: &bits)
    normal(lengths, alphabet: 256, into: &bits)
    if longCodes {
      normal(lengths, alphabet: 256, into: &bits)
      normal(lengths, alphabet: 256, into: &bits)
    } else {
      single(0, into: &bits)
      single(0, into: &bits)
    }
    single(0, into: &bits)
    for block in 0..<blocks {
      let value = entropy(block)
      let green = Int(value & 0xFF)
      let red = Int(value >> 8 & 0xFF)
      bits.code(codes[green], length: lengths[green])
      bits.code(codes[red], length: lengths[red])
      if longCodes {
        bits.code(codes[15], length: 15)
        bits.code(codes[15], length: 15)
      }
    }
    // Each group: five one-symbol codes (the image then takes no bits at all), or five
    // normal codes of 8-bit literals and 5- and 6-bit distances.
    let eight = [Int](repeating: 8, count: 256)
    let distances = [Int](repeating: 5, count: 24) + [Int](repeating: 6, count: 16)
    for group in 0..<groups {
      // The last group stays zero-bit when the groups before it are full: the pixels use it.
      if fullGroups && (group < groups - 1 || !longCodes) {
        for alphabet in [280, 256, 256, 256] { normal(eight, alphabet: alphabet, into: &bits) }
        normal(distances, alphabet: 40, into: &bits)
      } else {
        for _ in 0..<5 { single(0, into: &bits) }
      }
    }
    if fullGroups && !longCodes {
      // Literals of grey 0x80 in every pixel: four 8-bit codes.
      for _ in 0..<(width * height) {
        for _ in 0..<4 { bits.code(0x80, length: 8) }
      }
    }
    let payload = bits.bytes
    func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * $0) & 0xFF) } }
    let chunk =
      Array("VP8L".utf8) + le32(payload.count) + payload + (payload.count % 2 == 1 ? [0] : [])
    return Array("RIFF".utf8) + le32(chunk.count + 4) + Array("WEBP".utf8) + chunk
  }
}
