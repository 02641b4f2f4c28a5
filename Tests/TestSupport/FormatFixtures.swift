import ImagePipeline

/// Small files of the new formats built byte by byte, for what the corpus cannot show with a
/// known answer: animations whose frames differ, WebP EXIF orientation on a known picture.
enum FormatFixtures {
  /// One frame of a GIF: its rectangle on the screen and one palette index per pixel.
  struct GIFFrame {
    var left = 0
    var top = 0
    var width: Int
    var height: Int
    var indices: [UInt8]
    /// The palette index drawn transparent, if any.
    var transparent: UInt8?
    /// Rows stored in the four interlaced passes.
    var interlaced = false
  }

  /// A GIF89a with a 256-entry global palette and `frames`. The image data is LZW with a
  /// clear code every 254 codes, so every code is 9 bits and literal (valid, if large).
  static func gif(
    width: Int, height: Int, palette: [(UInt8, UInt8, UInt8)], frames: [GIFFrame]
  ) -> [UInt8] {
    var out = Array("GIF89a".utf8)
    out += le16(width) + le16(height) + [0xF7, 0, 0]  // global table of 256 entries
    for i in 0..<256 {
      let c = i < palette.count ? palette[i] : (0, 0, 0)
      out += [c.0, c.1, c.2]
    }
    // NETSCAPE loop extension: an animation.
    out += [0x21, 0xFF, 11] + Array("NETSCAPE2.0".utf8) + [3, 1, 0, 0, 0]
    for frame in frames {
      let flags: UInt8 = frame.transparent == nil ? 0x04 : 0x05
      out += [0x21, 0xF9, 4, flags, 10, 0, frame.transparent ?? 0, 0]
      out +=
        [0x2C] + le16(frame.left) + le16(frame.top) + le16(frame.width)
        + le16(frame.height) + [frame.interlaced ? 0x40 : 0]
      var stored = frame.indices
      if frame.interlaced {
        stored = []
        for (start, step) in [(0, 8), (4, 8), (2, 4), (1, 2)] {
          for row in stride(from: start, to: frame.height, by: step) {
            stored += frame.indices[(row * frame.width)..<((row + 1) * frame.width)]
          }
        }
      }
      out += [8] + subBlocks(lzwLiteral(stored))
    }
    return out + [0x3B]
  }

  private static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }

  private static func subBlocks(_ data: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var at = 0
    while at < data.count {
      let n = min(255, data.count - at)
      out += [UInt8(n)] + data[at..<(at + n)]
      at += n
    }
    return out + [0]
  }

  /// 9-bit codes, least significant bit first: clear, literals (a clear again before the
  /// decoder's table would need a tenth bit), end.
  private static func lzwLiteral(_ indices: [UInt8]) -> [UInt8] {
    var codes: [Int] = [256]
    for (i, index) in indices.enumerated() {
      if i > 0 && i % 254 == 0 { codes.append(256) }
      codes.append(Int(index))
    }
    codes.append(257)
    var out: [UInt8] = []
    var buffer = 0
    var bits = 0
    for code in codes {
      buffer |= code << bits
      bits += 9
      while bits >= 8 {
        out.append(UInt8(buffer & 0xFF))
        buffer >>= 8
        bits -= 8
      }
    }
    if bits > 0 { out.append(UInt8(buffer & 0xFF)) }
    return out
  }

  /// The chunks of a still WebP after its RIFF header, without a VP8X: what a frame or an
  /// extended file carries (ALPH and VP8, or VP8L).
  private static func bitstreamChunks(_ webp: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var at = 12
    while at + 8 <= webp.count {
      let tag = String(decoding: webp[at..<(at + 4)], as: UTF8.self)
      let size =
        Int(webp[at + 4]) | Int(webp[at + 5]) << 8 | Int(webp[at + 6]) << 16
        | Int(webp[at + 7]) << 24
      let end = at + 8 + size + (size & 1)
      if tag != "VP8X" { out += webp[at..<min(end, webp.count)] }
      at = end
    }
    return out
  }

  private static func chunk(_ tag: String, _ payload: [UInt8]) -> [UInt8] {
    var out = Array(tag.utf8) + le32(payload.count) + payload
    if payload.count & 1 == 1 { out.append(0) }
    return out
  }

  private static func le24(_ v: Int) -> [UInt8] {
    [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF)]
  }

  private static func le32(_ v: Int) -> [UInt8] { le24(v) + [UInt8(v >> 24 & 0xFF)] }

  private static func riff(_ chunks: [UInt8]) -> [UInt8] {
    Array("RIFF".utf8) + le32(4 + chunks.count) + Array("WEBP".utf8) + chunks
  }

  /// An animated WebP: each frame a still WebP placed at an even offset, not blended.
  static func animatedWebP(
    width: Int, height: Int, frames: [(webp: [UInt8], x: Int, y: Int, width: Int, height: Int)]
  ) -> [UInt8] {
    var chunks = chunk("VP8X", [0x12, 0, 0, 0] + le24(width - 1) + le24(height - 1))
    chunks += chunk("ANIM", [0, 0, 0, 0, 0, 0])
    for frame in frames {
      let header =
        le24(frame.x / 2) + le24(frame.y / 2) + le24(frame.width - 1) + le24(frame.height - 1)
        + le24(100) + [0x02]
      chunks += chunk("ANMF", header + bitstreamChunks(frame.webp))
    }
    return riff(chunks)
  }

  /// A still WebP with an EXIF chunk naming `orientation`.
  static func webp(_ still: [UInt8], width: Int, height: Int, orientation: Int) -> [UInt8] {
    let body = bitstreamChunks(still)
    let alpha: UInt8 = body.starts(with: Array("ALPH".utf8)) ? 0x10 : 0
    // Big-endian TIFF, one IFD entry: Orientation (0x0112), SHORT, 1, the value.
    let tiff: [UInt8] =
      Array("MM".utf8) + [0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1]
      + [0, UInt8(orientation), 0, 0] + [0, 0, 0, 0]
    let vp8x = chunk("VP8X", [0x08 | alpha, 0, 0, 0] + le24(width - 1) + le24(height - 1))
    return riff(vp8x + body + chunk("EXIF", tiff))
  }
}
