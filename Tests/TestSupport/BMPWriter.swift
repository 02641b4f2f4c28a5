import ImagePipeline

/// BMP and ICO files written byte by byte from a known picture, in every encoding thumbd's
/// BMP parser reads, so a decode can be compared with the picture pixel for pixel. Written
/// from the format's description (header layouts, row padding, RLE commands), not from any
/// decoder's code.
enum BMPWriter {
  /// How the pixels are stored.
  enum Encoding: String, CaseIterable, Sendable {
    /// Palette indices of 1, 2, 4 or 8 bits (the picture must have that few colours).
    case palette1, palette2, palette4, palette8
    /// 8-bit indices in an OS/2 1.x file (12-byte header, 3-byte palette entries).
    case core8
    /// Run-length coded indices: encoded runs and absolute (literal) runs.
    case rle8, rle4
    /// 16 bits: X1R5G5B5 (no masks), and R5G6B5 through bit fields.
    case rgb555, rgb565
    /// 24-bit BGR.
    case rgb24
    /// 32 bits: BGRX, and BGRA through a V5 header's bit fields with an alpha mask.
    case rgb32, argb32

    /// Bits a palette index takes, nil for direct colour.
    var indexBits: Int? {
      switch self {
      case .palette1: 1
      case .palette2: 2
      case .palette4, .rle4: 4
      case .palette8, .core8, .rle8: 8
      default: nil
      }
    }

    /// Whether each sample keeps all 8 bits (16-bit encodings round them).
    var exact: Bool { self != .rgb555 && self != .rgb565 }
  }

  static func le(_ value: Int, _ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
  }

  /// A picture of `colours` distinct colours (at most 256) in bands and blocks, with every
  /// side's rows different, so a flip or a shift shows.
  static func picture(width: Int, height: Int, colours: Int, alpha: Bool = false) -> Bitmap {
    let channels = alpha ? 4 : 3
    var pixels: [UInt8] = []
    pixels.reserveCapacity(width * height * channels)
    for y in 0..<height {
      for x in 0..<width {
        let index = (x * 7 / max(width, 1) + y * 5 / max(height, 1) * 3 + (x + 2 * y) / 9) % colours
        pixels += [UInt8(index * 37 % 256), UInt8(255 - index * 11 % 256), UInt8(index * 3 % 256)]
        if alpha { pixels.append(UInt8((x * 255) / max(width - 1, 1))) }
      }
    }
    return Bitmap(pixels: pixels, width: width, height: height, channels: channels)
  }

  /// The picture as a BMP file. Rows are stored bottom-up unless `topDown`.
  static func bmp(_ picture: Bitmap, _ encoding: Encoding, topDown: Bool = false) -> [UInt8] {
    let (palette, indices) = paletteOf(picture, encoding)
    let body = dib(picture, encoding, palette: palette, indices: indices, topDown: topDown)
    let offset = 14 + body.header.count + body.palette.count
    let size = offset + body.rows.count
    return Array("BM".utf8) + le(size, 4) + le(0, 4) + le(offset, 4) + body.header + body.palette
      + body.rows
  }

  /// An ICO of the given images: a DIB entry (24-bit with an AND mask from alpha below 128,
  /// or 32-bit BGRA when `bgra`), or a PNG entry.
  static func ico(_ images: [(picture: Bitmap, png: Bool)], bgra: Bool = false) throws -> [UInt8] {
    var blobs: [[UInt8]] = []
    for (picture, png) in images {
      if png {
        blobs.append(try ImageEncoder.png(picture))
        continue
      }
      let encoding: Encoding = bgra ? .argb32 : .rgb24
      let body = dib(picture, encoding, palette: [], indices: [], topDown: false, icon: true)
      var mask: [UInt8] = []
      let maskRow = (picture.width + 31) / 32 * 4
      for y in (0..<picture.height).reversed() {
        var row = [UInt8](repeating: 0, count: maskRow)
        for x in 0..<picture.width where picture.channels == 4 {
          if picture.pixels[(y * picture.width + x) * 4 + 3] < 128 {
            row[x / 8] |= UInt8(0x80 >> (x % 8))
          }
        }
        mask += row
      }
      blobs.append(body.header + body.rows + mask)
    }
    var bytes = le(0, 2) + le(1, 2) + le(images.count, 2)
    var offset = 6 + 16 * images.count
    for (index, (picture, _)) in images.enumerated() {
      bytes += [UInt8(picture.width & 0xFF), UInt8(picture.height & 0xFF), 0, 0]
      bytes += le(1, 2) + le(32, 2) + le(blobs[index].count, 4) + le(offset, 4)
      offset += blobs[index].count
    }
    return bytes + blobs.flatMap { $0 }
  }

  /// The picture's colours as a palette, and each pixel's index.
  private static func paletteOf(_ picture: Bitmap, _ encoding: Encoding) -> ([[UInt8]], [Int]) {
    guard let bits = encoding.indexBits else { return ([], []) }
    var palette: [[UInt8]] = []
    var known: [[UInt8]: Int] = [:]
    var indices: [Int] = []
    for i in 0..<(picture.width * picture.height) {
      let rgb = Array(picture.pixels[(i * picture.channels)..<(i * picture.channels + 3)])
      if let index = known[rgb] {
        indices.append(index)
      } else {
        known[rgb] = palette.count
        indices.append(palette.count)
        palette.append(rgb)
      }
    }
    precondition(palette.count <= 1 << bits, "\(palette.count) colours for \(bits) bits")
    return (palette, indices)
  }

  private struct Body {
    var header: [UInt8]
    var palette: [UInt8]
    var rows: [UInt8]
  }

  private static func dib(
    _ picture: Bitmap, _ encoding: Encoding, palette: [[UInt8]], indices: [Int], topDown: Bool,
    icon: Bool = false
  ) -> Body {
    let w = picture.width
    let h = picture.height
    let bits: Int
    var compression = 0
    switch encoding {
    case .rgb555, .rgb565: bits = 16
    case .rgb24: bits = 24
    case .rgb32, .argb32: bits = 32
    default: bits = encoding.indexBits!
    }
    if encoding == .rle8 { compression = 1 }
    if encoding == .rle4 { compression = 2 }
    if encoding == .rgb565 || encoding == .argb32 { compression = 3 }
    let storedHeight = icon ? 2 * h : (topDown ? -h : h)
    var header: [UInt8]
    if encoding == .core8 {
      header = le(12, 4) + le(w, 2) + le(h, 2) + le(1, 2) + le(8, 2)
    } else {
      let size = encoding == .argb32 ? 124 : encoding == .rgb565 ? 56 : 40
      header = le(size, 4) + le(w, 4) + le(storedHeight, 4) + le(1, 2) + le(bits, 2)
      header += le(compression, 4) + le(0, 4) + le(2835, 4) + le(2835, 4)
      header += le(palette.count, 4) + le(0, 4)
      if encoding == .rgb565 { header += le(0xF800, 4) + le(0x07E0, 4) + le(0x1F, 4) + le(0, 4) }
      if encoding == .argb32 {
        header += le(0xFF_0000, 4) + le(0xFF00, 4) + le(0xFF, 4) + le(0xFF00_0000, 4)
        header += Array("BGRs".utf8) + [UInt8](repeating: 0, count: 36 + 12)
        header += le(4, 4) + le(0, 4) + le(0, 4) + le(0, 4)
      }
    }
    let entry = encoding == .core8 ? 3 : 4
    var paletteBytes: [UInt8] = []
    for rgb in palette { paletteBytes += [rgb[2], rgb[1], rgb[0]] + (entry == 4 ? [0] : []) }
    var rows: [UInt8] = []
    let order = topDown ? Array(0..<h) : Array((0..<h).reversed())
    let stride = (w * bits + 31) / 32 * 4
    for y in order {
      if encoding == .rle8 || encoding == .rle4 {
        rows += rle(Array(indices[(y * w)..<(y * w + w)]), four: encoding == .rle4)
        rows += [0, 0]
        continue
      }
      var row = [UInt8](repeating: 0, count: stride)
      for x in 0..<w {
        let p = (y * w + x) * picture.channels
        let (r, g, b) = (
          Int(picture.pixels[p]), Int(picture.pixels[p + 1]), Int(picture.pixels[p + 2])
        )
        let a = picture.channels == 4 ? Int(picture.pixels[p + 3]) : 255
        switch encoding {
        case .rgb555:
          let v = (r >> 3) << 10 | (g >> 3) << 5 | b >> 3
          row[2 * x] = UInt8(v & 0xFF)
          row[2 * x + 1] = UInt8(v >> 8)
        case .rgb565:
          let v = (r >> 3) << 11 | (g >> 2) << 5 | b >> 3
          row[2 * x] = UInt8(v & 0xFF)
          row[2 * x + 1] = UInt8(v >> 8)
        case .rgb24:
          row[3 * x] = UInt8(b)
          row[3 * x + 1] = UInt8(g)
          row[3 * x + 2] = UInt8(r)
        case .rgb32, .argb32:
          row[4 * x] = UInt8(b)
          row[4 * x + 1] = UInt8(g)
          row[4 * x + 2] = UInt8(r)
          row[4 * x + 3] = encoding == .argb32 ? UInt8(a) : 0
        default:
          let index = indices[y * w + x]
          let perByte = 8 / bits
          row[x / perByte] |= UInt8(index << (8 - bits * (x % perByte + 1)))
        }
      }
      rows += row
    }
    if encoding == .rle8 || encoding == .rle4 { rows += [0, 1] }
    return Body(header: header, palette: paletteBytes, rows: rows)
  }

  /// One row as RLE commands: runs of one index as encoded runs (RLE4: both nibbles the same),
  /// stretches of 3 or more different ones as absolute runs (padded to 16 bits).
  private static func rle(_ row: [Int], four: Bool) -> [UInt8] {
    var out: [UInt8] = []
    var x = 0
    while x < row.count {
      var run = 1
      while x + run < row.count && row[x + run] == row[x] && run < 255 { run += 1 }
      if run >= 2 {
        out += [UInt8(run), UInt8(four ? row[x] << 4 | row[x] : row[x])]
        x += run
        continue
      }
      var end = x + 1
      while end < row.count && end - x < 255 && (end + 1 >= row.count || row[end] != row[end + 1]) {
        end += 1
      }
      let literal = Array(row[x..<end])
      if literal.count < 3 {
        for index in literal { out += [1, UInt8(four ? index << 4 : index)] }
      } else {
        var bytes: [UInt8] = []
        if four {
          for i in stride(from: 0, to: literal.count, by: 2) {
            bytes.append(UInt8(literal[i] << 4 | (i + 1 < literal.count ? literal[i + 1] : 0)))
          }
        } else {
          bytes = literal.map(UInt8.init)
        }
        if bytes.count % 2 == 1 { bytes.append(0) }
        out += [0, UInt8(literal.count)] + bytes
      }
      x = end
    }
    return out
  }
}
