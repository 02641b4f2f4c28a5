import ImagePipeline

/// Uncompressed TIFF files written byte by byte from known pictures: pages and their
/// reduced-resolution levels (in the main chain or as SubIFDs), strips or tiles, contiguous
/// or separate planes, 8 or 16 bits, alpha, palette, CMYK and orientation. Written from the
/// TIFF 6.0 layout (IFD entries, offsets, strips), not from any decoder's code; compressed
/// files come from the corpus and from libtiff's own tools in the benchmarks.
enum TIFFWriter {
  /// How one directory's pixels are stored.
  struct Image {
    var picture: Bitmap
    var bits = 8
    /// 2 RGB, 1 grey (BlackIsZero), 3 palette, 5 CMYK (the picture's channels are C, M, Y, K).
    var photometric = 2
    var separatePlanes = false
    /// Tile side, nil for strips.
    var tile: Int? = nil
    var rowsPerStrip = 16
    var orientation = 1
    /// SubfileType: 1 for a reduced-resolution image.
    var reduced = false
    /// 1 associated (premultiplied), 2 unassociated, when the picture has a fourth channel.
    var alphaKind = 2
    /// Palette colours (photometric 3): the picture's first channel holds indices.
    var palette: [[UInt8]] = []
    /// Reduced-resolution levels stored as this directory's SubIFDs.
    var subImages: [Image] = []
    /// Compression tag value, with the stored chunks given as they are (nil: uncompressed,
    /// made from the picture).
    var compression = 1
    var encodedChunks: [[UInt8]]? = nil
  }

  private typealias Entry = (tag: Int, type: Int, values: [Int])

  /// A little-endian TIFF whose main chain holds `images` in order.
  static func file(_ images: [Image]) -> [UInt8] {
    var bytes: [UInt8] = Array("II".utf8) + le(42, 2) + le(8, 4)
    var links: [Int] = [4]  // where each directory's offset is written
    for image in images {
      let (at, next) = write(image, into: &bytes)
      patch(&bytes, at: links.removeLast(), value: at)
      links.append(next)
    }
    return bytes
  }

  private static func le(_ value: Int, _ count: Int) -> [UInt8] { BMPWriter.le(value, count) }

  private static func patch(_ bytes: inout [UInt8], at offset: Int, value: Int) {
    bytes.replaceSubrange(offset..<(offset + 4), with: le(value, 4))
  }

  /// Writes the directory's pixel chunks, its SubIFDs, then the directory; returns where the
  /// directory starts and where its next-directory offset lies.
  private static func write(_ image: Image, into bytes: inout [UInt8]) -> (Int, Int) {
    let chunks = image.encodedChunks ?? pixelChunks(image)
    var offsets: [Int] = []
    for chunk in chunks {
      offsets.append(bytes.count)
      bytes += chunk
      if bytes.count % 2 == 1 { bytes.append(0) }
    }
    var subOffsets: [Int] = []
    for sub in image.subImages {
      let (at, _) = write(sub, into: &bytes)
      subOffsets.append(at)
    }
    let p = image.picture
    let samples = image.photometric == 3 ? 1 : p.channels
    var entries: [Entry] = [
      (254, 4, [image.reduced ? 1 : 0]), (256, 4, [p.width]), (257, 4, [p.height]),
      (258, 3, Array(repeating: image.bits, count: samples)), (259, 3, [image.compression]),
      (262, 3, [image.photometric]), (274, 3, [image.orientation]), (277, 3, [samples]),
      (284, 3, [image.separatePlanes ? 2 : 1]),
    ]
    if let tile = image.tile {
      entries += [
        (322, 3, [tile]), (323, 3, [tile]), (324, 4, offsets), (325, 4, chunks.map(\.count)),
      ]
    } else {
      entries += [(273, 4, offsets), (278, 4, [image.rowsPerStrip]), (279, 4, chunks.map(\.count))]
    }
    if samples == 4 && image.photometric == 2 || samples == 2 && image.photometric == 1 {
      entries.append((338, 3, [image.alphaKind]))
    }
    if image.photometric == 3 {
      let n = 1 << image.bits
      let colours = (0..<n).map { $0 < image.palette.count ? image.palette[$0] : [0, 0, 0] }
      entries.append((320, 3, (0..<3).flatMap { c in colours.map { Int($0[c]) * 257 } }))
    }
    if !subOffsets.isEmpty { entries.append((330, 4, subOffsets)) }
    entries.sort { $0.tag < $1.tag }
    // Values over 4 bytes go before the directory.
    var inline: [[UInt8]] = []
    for entry in entries {
      let size = entry.type == 3 ? 2 : 4
      let raw = entry.values.flatMap { le($0, size) }
      if raw.count <= 4 {
        inline.append(raw + [UInt8](repeating: 0, count: 4 - raw.count))
      } else {
        inline.append(le(bytes.count, 4))
        bytes += raw
        if bytes.count % 2 == 1 { bytes.append(0) }
      }
    }
    let at = bytes.count
    bytes += le(entries.count, 2)
    for (entry, value) in zip(entries, inline) {
      bytes += le(entry.tag, 2) + le(entry.type, 2) + le(entry.values.count, 4) + value
    }
    let next = bytes.count
    bytes += le(0, 4)
    return (at, next)
  }

  /// The stored chunks: strips (each plane's in turn) or tiles, samples as 8 or 16 bits.
  private static func pixelChunks(_ image: Image) -> [[UInt8]] {
    let p = image.picture
    let samples = image.photometric == 3 ? 1 : p.channels
    func sample(_ x: Int, _ y: Int, _ c: Int) -> [UInt8] {
      let v = Int(p.pixels[(y * p.width + x) * p.channels + c])
      return image.bits == 16 ? le(v * 257, 2) : [UInt8(v)]
    }
    func row(_ y: Int, _ x0: Int, _ x1: Int, plane: Int?) -> [UInt8] {
      var out: [UInt8] = []
      for x in x0..<x1 {
        if let plane {
          out += x < p.width && y < p.height ? sample(x, y, plane) : le(0, image.bits / 8)
        } else {
          for c in 0..<samples {
            out += x < p.width && y < p.height ? sample(x, y, c) : le(0, image.bits / 8)
          }
        }
      }
      return out
    }
    let planes: [Int?] = image.separatePlanes ? (0..<samples).map { $0 } : [nil]
    var chunks: [[UInt8]] = []
    for plane in planes {
      if let tile = image.tile {
        for y0 in stride(from: 0, to: p.height, by: tile) {
          for x0 in stride(from: 0, to: p.width, by: tile) {
            chunks.append((y0..<(y0 + tile)).flatMap { row($0, x0, x0 + tile, plane: plane) })
          }
        }
      } else {
        for y0 in stride(from: 0, to: p.height, by: image.rowsPerStrip) {
          let y1 = min(p.height, y0 + image.rowsPerStrip)
          chunks.append((y0..<y1).flatMap { row($0, 0, p.width, plane: plane) })
        }
      }
    }
    return chunks
  }
}
