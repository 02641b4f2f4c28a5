/// PNG chunks, built and read: the text keys the freedesktop thumbnail cache keeps before a
/// thumbnail's image data.
package enum PNGChunks {
  /// The eight bytes every PNG starts with.
  package static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

  /// One chunk: length, type, data and the CRC-32 of type and data.
  package static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    let body = Array(type.utf8) + data
    return bigEndian(UInt32(data.count)) + body + bigEndian(crc32(body))
  }

  /// A `tEXt` chunk: Latin-1 keyword, a zero byte, the text. Nil when the keyword is not 1 to
  /// 79 printable bytes or either holds a zero byte.
  package static func text(_ keyword: String, _ value: String) -> [UInt8]? {
    let key = Array(keyword.utf8)
    let text = Array(value.utf8)
    guard (1...79).contains(key.count), key.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }),
      !text.contains(0)
    else { return nil }
    return chunk("tEXt", key + [0] + text)
  }

  /// `png` with `chunks` placed right after its IHDR, so they come before any image data (GLib
  /// stops reading at the first IDAT). Nil when `png` does not start with a signature and an
  /// IHDR.
  package static func inserting(_ chunks: [[UInt8]], intoPNG png: [UInt8]) -> [UInt8]? {
    let ihdrEnd = signature.count + 8 + 13 + 4
    guard png.count >= ihdrEnd, png.starts(with: signature),
      Array(png[12..<16]) == Array("IHDR".utf8), readBigEndian(png, at: 8) == 13
    else { return nil }
    return Array(png[..<ihdrEnd]) + chunks.joined() + Array(png[ihdrEnd...])
  }

  /// `png` without the `tEXt` chunks before its first IDAT (to be given new ones with
  /// `inserting`). Nil when it is not a sequence of whole chunks up to an IDAT.
  package static func removingTexts(fromPNG png: [UInt8]) -> [UInt8]? {
    var kept = signature
    guard
      let idat = walk(
        png, { type, chunk in if !type.elementsEqual("tEXt".utf8) { kept += png[chunk] } })
    else { return nil }
    return kept + png[idat...]
  }

  /// The data of `png`'s first IDAT chunk (where its zlib stream starts). Nil when it is not
  /// a sequence of whole chunks up to an IDAT.
  package static func firstImageData(ofPNG png: [UInt8]) -> ArraySlice<UInt8>? {
    guard let idat = walk(png, { _, _ in }) else { return nil }
    return png[(idat + 8)..<(idat + 8 + Int(readBigEndian(png, at: idat)))]
  }

  /// Visits `png`'s whole chunks before its first IDAT, with their types, and returns where
  /// that IDAT starts. Nil for a bad signature, a chunk running past the end, or no IDAT.
  private static func walk(
    _ png: [UInt8], _ visit: (_ type: ArraySlice<UInt8>, _ chunk: Range<Int>) -> Void
  ) -> Int? {
    guard png.starts(with: signature) else { return nil }
    var offset = signature.count
    while offset + 12 <= png.count {
      let length = Int(readBigEndian(png, at: offset))
      guard length <= png.count - offset - 12 else { return nil }
      let type = png[(offset + 4)..<(offset + 8)]
      if type.elementsEqual("IDAT".utf8) { return offset }
      visit(type, offset..<(offset + 12 + length))
      offset += 12 + length
    }
    return nil
  }

  /// The `tEXt` keys and values before the first IDAT, read through `read(offset, count)`
  /// (which returns at most `count` bytes at `offset`; fewer only at the end). Reads at most
  /// `limit` bytes in all; nil for anything that is not a well-formed PNG head within that:
  /// a bad signature or CRC, a chunk running past the limit, a duplicate key, or no IDAT.
  package static func texts(
    limit: Int, read: (_ offset: Int, _ count: Int) -> [UInt8]?
  ) -> [String: String]? {
    guard let head = read(0, signature.count), head == signature else { return nil }
    var offset = signature.count
    var found: [String: String] = [:]
    var first = true
    while offset + 8 <= limit {
      guard let header = read(offset, 8), header.count == 8 else { return nil }
      let length = Int(readBigEndian(header, at: 0))
      let type = Array(header[4..<8])
      if first && type != Array("IHDR".utf8) { return nil }
      first = false
      if type == Array("IDAT".utf8) { return found }
      guard length <= limit - offset - 12 else { return nil }
      guard let rest = read(offset + 8, length + 4), rest.count == length + 4 else { return nil }
      let data = Array(rest[..<length])
      guard crc32(type + data) == readBigEndian(rest, at: length) else { return nil }
      if type == Array("tEXt".utf8) {
        guard let zero = data.firstIndex(of: 0) else { return nil }
        // Latin-1: every byte is the code point of the same value.
        let key = String(String.UnicodeScalarView(data[..<zero].map { Unicode.Scalar($0) }))
        let value = String(decoding: data[(zero + 1)...], as: UTF8.self)
        guard found.updateValue(value, forKey: key) == nil else { return nil }
      }
      offset += 12 + length
    }
    return nil
  }

  /// CRC-32 (ISO 3309, as PNG uses it).
  package static func crc32(_ bytes: [UInt8]) -> UInt32 {
    var c: UInt32 = 0xFFFF_FFFF
    bytes.withUnsafeBufferPointer { buffer in
      for byte in buffer { c = crcTable[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
    }
    return c ^ 0xFFFF_FFFF
  }

  private static let crcTable: [UInt32] = (0..<256).map { n in
    var c = UInt32(n)
    for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    return c
  }

  private static func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
  }

  private static func readBigEndian(_ bytes: [UInt8], at offset: Int) -> UInt32 {
    UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16
      | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
  }
}
