import ImagePipeline

/// ICC profiles built field by field, for shapes that make lcms2 work without end while it
/// links (long element chains, curves of many segments), and the three ways a profile
/// arrives: PNG iCCP, JPEG APP2 and WebP ICCP.
enum ICCFixtures {
  static func be32(_ v: UInt32) -> [UInt8] {
    [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
  }

  static func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

  static func float(_ v: Float) -> [UInt8] { be32(v.bitPattern) }

  /// A version 4 RGB display profile (PCS XYZ) whose only tags, D2B0 and D2B1, share `tag`.
  static func rgbProfile(floatTag tag: [UInt8]) -> [UInt8] {
    let tagStart = 128 + 4 + 2 * 12
    var header = [UInt8](repeating: 0, count: 128)
    let size = UInt32(tagStart + tag.count)
    header.replaceSubrange(0..<4, with: be32(size))
    header.replaceSubrange(8..<12, with: [4, 0x30, 0, 0])
    header.replaceSubrange(12..<16, with: Array("mntr".utf8))
    header.replaceSubrange(16..<20, with: Array("RGB ".utf8))
    header.replaceSubrange(20..<24, with: Array("XYZ ".utf8))
    header.replaceSubrange(36..<40, with: Array("acsp".utf8))
    // D50, as s15Fixed16.
    header.replaceSubrange(68..<80, with: be32(0xF6D6) + be32(0x1_0000) + be32(0xD32D))
    var table = be32(2)
    for name in ["D2B0", "D2B1"] {
      table += Array(name.utf8) + be32(UInt32(tagStart)) + be32(UInt32(tag.count))
    }
    return header + table + tag
  }

  /// A multiProcessElement tag of `count` elements, every position pointing at one 3x3
  /// identity matrix: 8 bytes an element (50,000 make 400 KB).
  static func chainedMatrices(_ count: Int) -> [UInt8] {
    let matrix =
      Array("matf".utf8) + be32(0) + be16(3) + be16(3)
      + [1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0].flatMap { float($0) }
    let elementOffset = 16 + count * 8
    var tag = Array("mpet".utf8) + be32(0) + be16(3) + be16(3) + be32(UInt32(count))
    tag.reserveCapacity(elementOffset + matrix.count)
    let position = be32(UInt32(elementOffset)) + be32(UInt32(matrix.count))
    for _ in 0..<count { tag += position }
    return tag + matrix
  }

  /// A multiProcessElement tag of one curve set whose three curves have `segments` segments
  /// each (formula segments, y = x).
  static func segmentedCurves(_ segments: Int) -> [UInt8] {
    var curve = Array("curf".utf8) + be32(0) + be16(segments) + be16(0)
    for index in 1..<segments { curve += float(Float(index) / Float(segments)) }
    for _ in 0..<segments {
      // parf, function type 0: y = (a * x + b) ^ gamma + c, with gamma 1, a 1, b 0, c 0.
      curve +=
        Array("parf".utf8) + be32(0) + be16(0) + be16(0) + [1, 1, 0, 0].flatMap { float($0) }
    }
    let curvesOffset = 12 + 3 * 8
    var set = Array("cvst".utf8) + be32(0) + be16(3) + be16(3)
    for _ in 0..<3 { set += be32(UInt32(curvesOffset)) + be32(UInt32(curve.count)) }
    set += curve
    return Array("mpet".utf8) + be32(0) + be16(3) + be16(3) + be32(1) + be32(24)
      + be32(UInt32(set.count)) + set
  }

  // MARK: - Carriers

  /// `png` with an iCCP chunk carrying `profile` (zlib, stored blocks) before its IDAT.
  static func png(_ png: [UInt8], profile: [UInt8]) throws -> [UInt8] {
    guard let found = png.firstRange(of: Array("IDAT".utf8)) else {
      throw ThumbnailError.corrupt("no IDAT")
    }
    let idat = found.lowerBound - 4
    var zlib: [UInt8] = [0x78, 0x01]
    var at = 0
    repeat {
      let count = min(65535, profile.count - at)
      let final: UInt8 = at + count == profile.count ? 1 : 0
      zlib += [
        final, UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF),
        UInt8(~count >> 8 & 0xFF),
      ]
      zlib += profile[at..<(at + count)]
      at += count
    } while at < profile.count
    var a: UInt32 = 1
    var b: UInt32 = 0
    for byte in profile {
      a = (a + UInt32(byte)) % 65521
      b = (b + a) % 65521
    }
    zlib += be32(b << 16 | a)
    let chunk = HostileInputs.chunk("iCCP", Array("icc".utf8) + [0, 0] + zlib)
    return Array(png[..<idat]) + chunk + Array(png[idat...])
  }

  /// `jpeg` with `profile` in APP2 ICC_PROFILE segments right after its SOI.
  static func jpeg(_ jpeg: [UInt8], profile: [UInt8]) -> [UInt8] {
    let pieces = stride(from: 0, to: profile.count, by: 65519).map {
      profile[$0..<min($0 + 65519, profile.count)]
    }
    var segments: [UInt8] = []
    for (index, piece) in pieces.enumerated() {
      let body = Array("ICC_PROFILE".utf8) + [0, UInt8(index + 1), UInt8(pieces.count)] + piece
      segments += [0xFF, 0xE2] + be16(body.count + 2) + body
    }
    return Array(jpeg[..<2]) + segments + Array(jpeg[2...])
  }

  /// A still lossy or lossless WebP (a simple RIFF of one VP8 or VP8L chunk) made extended,
  /// with `profile` in an ICCP chunk.
  static func webp(_ webp: [UInt8], width: Int, height: Int, profile: [UInt8]) -> [UInt8] {
    func le(_ v: Int, _ bytes: Int) -> [UInt8] { (0..<bytes).map { UInt8(v >> (8 * $0) & 0xFF) } }
    func chunk(_ tag: String, _ payload: [UInt8]) -> [UInt8] {
      Array(tag.utf8) + le(payload.count, 4) + payload + (payload.count % 2 == 1 ? [0] : [])
    }
    let vp8x = chunk("VP8X", [0x20, 0, 0, 0] + le(width - 1, 3) + le(height - 1, 3))
    let body = vp8x + chunk("ICCP", profile) + Array(webp[12...])
    return Array("RIFF".utf8) + le(body.count + 4, 4) + Array("WEBP".utf8) + body
  }
}
