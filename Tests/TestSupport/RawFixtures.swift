import ImagePipeline

/// Camera-RAW-shaped files built byte by byte: TIFF-structured raws (a NEF's, a DNG's and a
/// CR2's layout: IFDs, SubIFDs, JPEG previews, sensor-data directories), Fujifilm's RAF
/// header, with JPEG previews of known colours and sizes. Written from the formats' public
/// descriptions, not from any decoder's code.
enum RawFixtures {
  /// A TIFF structure laid out front to back: blobs and directories are appended, each call
  /// returning where it starts, so a directory can point at what was written before it.
  struct Builder {
    private(set) var bytes: [UInt8]

    /// Starts a file with `magic` (8 bytes or more: its IFD0 offset, at 4, is patched by
    /// `finish`).
    init(magic: [UInt8] = Array("II".utf8) + [42, 0, 0, 0, 0, 0]) { bytes = magic }

    static func le(_ value: Int, _ count: Int) -> [UInt8] { BMPWriter.le(value, count) }

    mutating func blob(_ data: [UInt8]) -> Int {
      if bytes.count % 2 == 1 { bytes.append(0) }
      let at = bytes.count
      bytes += data
      return at
    }

    /// A directory of (tag, type, values) entries (type 1 byte, 3 short, 4 long; 2 ASCII and
    /// 7 undefined with two values: the count, and the offset of data written before), then
    /// `next`.
    mutating func directory(_ entries: [(tag: Int, type: Int, values: [Int])], next: Int = 0)
      -> Int
    {
      var inline: [[UInt8]] = []
      var counts: [Int] = []
      for entry in entries.sorted(by: { $0.tag < $1.tag }) {
        if entry.type == 7 || entry.type == 2 {
          counts.append(entry.values[0])
          inline.append(Self.le(entry.values[1], 4))
          continue
        }
        counts.append(entry.values.count)
        let size = entry.type == 3 ? 2 : entry.type == 1 ? 1 : 4
        let raw = entry.values.flatMap { Self.le($0, size) }
        inline.append(
          raw.count <= 4 ? raw + [UInt8](repeating: 0, count: 4 - raw.count) : Self.le(blob(raw), 4)
        )
      }
      let sorted = entries.sorted(by: { $0.tag < $1.tag })
      if bytes.count % 2 == 1 { bytes.append(0) }
      let at = bytes.count
      bytes += Self.le(sorted.count, 2)
      for (index, entry) in sorted.enumerated() {
        bytes +=
          Self.le(entry.tag, 2) + Self.le(entry.type, 2) + Self.le(counts[index], 4)
          + inline[index]
      }
      bytes += Self.le(next, 4)
      return at
    }

    /// Points the header at IFD0 and returns the file.
    mutating func finish(ifd0: Int) -> [UInt8] {
      bytes.replaceSubrange(4..<8, with: Self.le(ifd0, 4))
      return bytes
    }
  }

  /// A JPEG of one colour.
  static func jpeg(_ width: Int, _ height: Int, _ rgb: [UInt8]) -> [UInt8] {
    let pixels = Array([[UInt8]](repeating: rgb, count: width * height).joined())
    return try! ImageEncoder.jpeg(
      Bitmap(pixels: pixels, width: width, height: height, channels: 3), quality: 95)
  }

  /// A directory of sensor data (CFA, 12 bits, one strip of zeros).
  private static func sensor(_ b: inout Builder, _ width: Int, _ height: Int) -> Int {
    let strip = b.blob([UInt8](repeating: 0, count: 64))
    return b.directory([
      (254, 4, [0]), (256, 4, [width]), (257, 4, [height]), (258, 3, [12]), (259, 3, [1]),
      (262, 3, [32803]), (273, 4, [strip]), (279, 4, [64]),
    ])
  }

  /// A NEF's layout: IFD0 a small uncompressed thumbnail with Make and Orientation, its
  /// SubIFDs a JPEG preview (JPEGInterchangeFormat) and the sensor data.
  static func nefLike(preview: (Int, Int), colour: [UInt8], orientation: Int = 1) -> [UInt8] {
    var b = Builder()
    let jpeg = jpeg(preview.0, preview.1, colour)
    let at = b.blob(jpeg)
    let previewIFD = b.directory([
      (254, 4, [1]), (259, 3, [6]), (513, 4, [at]), (514, 4, [jpeg.count]),
    ])
    let raw = sensor(&b, 4000, 3000)
    let thumbnail = b.blob([UInt8](repeating: 128, count: 16 * 12 * 3))
    let make = b.blob(Array("NIKON CORPORATION\0".utf8))
    let ifd0 = b.directory([
      (254, 4, [1]), (256, 4, [16]), (257, 4, [12]), (258, 3, [8, 8, 8]), (259, 3, [1]),
      (262, 3, [2]), (271, 2, [18, make]), (273, 4, [thumbnail]), (274, 3, [orientation]),
      (277, 3, [3]), (279, 4, [16 * 12 * 3]), (330, 4, [previewIFD, raw]),
    ])
    return b.finish(ifd0: ifd0)
  }

  /// A DNG's layout: IFD0 carries DNGVersion and a JPEG preview strip (compression 7,
  /// YCbCr); its SubIFD the sensor data.
  static func dngLike(preview: (Int, Int), colour: [UInt8], orientation: Int = 1) -> [UInt8] {
    var b = Builder()
    let jpeg = jpeg(preview.0, preview.1, colour)
    let at = b.blob(jpeg)
    let raw = sensor(&b, 4000, 3000)
    let ifd0 = b.directory([
      (254, 4, [1]), (256, 4, [preview.0]), (257, 4, [preview.1]), (258, 3, [8, 8, 8]),
      (259, 3, [7]), (262, 3, [6]), (273, 4, [at]), (274, 3, [orientation]), (277, 3, [3]),
      (279, 4, [jpeg.count]), (330, 4, [raw]), (50706, 1, [1, 4, 0, 0]),
    ])
    return b.finish(ifd0: ifd0)
  }

  /// A CR2's layout: its own magic after the TIFF header, IFD0 a JPEG strip (old-style JPEG
  /// compression 6), IFD1 a smaller JPEG through JPEGInterchangeFormat.
  static func cr2Like(large: (Int, Int), small: (Int, Int), colours: ([UInt8], [UInt8])) -> [UInt8]
  {
    var b = Builder(
      magic: Array("II".utf8) + [42, 0, 0, 0, 0, 0] + [0x43, 0x52, 2, 0, 0, 0, 0, 0])
    let big = jpeg(large.0, large.1, colours.0)
    let little = jpeg(small.0, small.1, colours.1)
    let bigAt = b.blob(big)
    let littleAt = b.blob(little)
    let raw = sensor(&b, 5000, 3000)
    let ifd1 = b.directory(
      [(259, 3, [6]), (513, 4, [littleAt]), (514, 4, [little.count])], next: 0)
    let make = b.blob(Array("Canon\0".utf8))
    let ifd0 = b.directory(
      [
        (256, 4, [large.0]), (257, 4, [large.1]), (259, 3, [6]), (271, 2, [6, make]),
        (273, 4, [bigAt]), (279, 4, [big.count]), (330, 4, [raw]),
      ], next: ifd1)
    return b.finish(ifd0: ifd0)
  }

  /// A JPEG of `outer` size and colour whose EXIF (APP1) carries a thumbnail JPEG (IFD1's
  /// JPEGInterchangeFormat) of `inner` size and colour.
  static func jpegWithThumbnail(
    outer: (Int, Int, [UInt8]), inner: (Int, Int, [UInt8])
  ) -> [UInt8] {
    let thumbnail = jpeg(inner.0, inner.1, inner.2)
    var tiff = Builder()
    let at = tiff.blob(thumbnail)
    let ifd1 = tiff.directory([(513, 4, [at]), (514, 4, [thumbnail.count])])
    let ifd0 = tiff.directory([(274, 3, [1])], next: ifd1)
    let exif = Array("Exif".utf8) + [0, 0] + tiff.finish(ifd0: ifd0)
    let app1: [UInt8] = [0xFF, 0xE1, UInt8((exif.count + 2) >> 8), UInt8((exif.count + 2) & 0xFF)]
    let main = jpeg(outer.0, outer.1, outer.2)
    return [0xFF, 0xD8] + app1 + exif + main.dropFirst(2)
  }

  /// A RAF: Fujifilm's header, whose JPEG offset and length (big-endian, at 84) point at the
  /// preview.
  static func raf(preview: (Int, Int), colour: [UInt8], jpeg given: [UInt8]? = nil) -> [UInt8] {
    let jpeg = given ?? jpeg(preview.0, preview.1, colour)
    var header = Array("FUJIFILMCCD-RAW 0201FF383501".utf8)
    header += [UInt8](repeating: 0, count: 84 - header.count)
    let be: (Int) -> [UInt8] = { v in (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) }
    }
    header += be(100) + be(jpeg.count) + [UInt8](repeating: 0, count: 8)
    return header + jpeg
  }
}
