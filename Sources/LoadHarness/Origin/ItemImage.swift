import ImagePipeline

/// Source images that carry their own item number and revision, readable back from any thumbnail of
/// them: a 4x4 grid of cells in four well-separated colours (two bits each), 20 bits of item
/// number, 4 bits of revision (modulo 16) and an 8-bit check. Cells are large (a quarter of the
/// side), so the code survives downsampling to 32 px and JPEG at any quality. A textured border
/// makes the decoder work on real detail.
public enum ItemImage {
  /// The four cell colours.
  static let palette: [(UInt8, UInt8, UInt8)] = [
    (16, 16, 16), (240, 240, 240), (220, 40, 40), (40, 80, 230),
  ]

  /// The largest item number that fits.
  public static let maxItem = (1 << 20) - 1
  /// Revisions are kept modulo this.
  public static let revisions = 16

  /// An RGB bitmap of `width` x `height` for `item` at `revision` (modulo `revisions`).
  public static func bitmap(item: Int, revision: Int = 0, width: Int, height: Int) -> Bitmap {
    precondition(item >= 0 && item <= maxItem)
    let symbols = code(for: item << 4 | (revision % revisions))
    var pixels = [UInt8](repeating: 0, count: width * height * 3)
    // The grid fills the centre 80% of each side; the rest is a fine texture.
    let left = width / 10
    let top = height / 10
    let gridWidth = width - 2 * left
    let gridHeight = height - 2 * top
    for y in 0..<height {
      for x in 0..<width {
        let offset = (y * width + x) * 3
        let gx = x - left
        let gy = y - top
        if gx >= 0 && gx < gridWidth && gy >= 0 && gy < gridHeight {
          let cell = (gy * 4 / gridHeight) * 4 + gx * 4 / gridWidth
          let colour = palette[symbols[cell]]
          pixels[offset] = colour.0
          pixels[offset + 1] = colour.1
          pixels[offset + 2] = colour.2
        } else {
          let texture = UInt8(truncatingIfNeeded: (x &* 7) ^ (y &* 13) ^ (item &* 31))
          pixels[offset] = 100 &+ texture / 4
          pixels[offset + 1] = 120 &+ texture / 5
          pixels[offset + 2] = 90 &+ texture / 6
        }
      }
    }
    return Bitmap(pixels: pixels, width: width, height: height, channels: 3)
  }

  /// Encoded source bytes: JPEG (quality 90, baseline or progressive) or PNG.
  public static func encoded(
    item: Int, revision: Int = 0, width: Int, height: Int, png: Bool, progressive: Bool = false
  ) throws -> [UInt8] {
    let image = bitmap(item: item, revision: revision, width: width, height: height)
    return try png
      ? ImageEncoder.png(image, level: 1)
      : ImageEncoder.jpeg(image, quality: 90, progressive: progressive)
  }

  /// Reads the item number from an encoded thumbnail of any size; nil when the code does not
  /// check out (not one of ours, or damaged).
  public static func item(in encoded: [UInt8]) -> Int? { read(encoded)?.item }

  /// Reads item number and revision (modulo `revisions`) from an encoded thumbnail.
  public static func read(_ encoded: [UInt8]) -> (item: Int, revision: Int)? {
    guard let bitmap = try? Thumbnailer().decodeFullResolution(.bytes(encoded)),
      let value = value(in: bitmap)
    else { return nil }
    return (value >> 4, value & 15)
  }

  /// Reads the item number from a decoded bitmap.
  public static func item(in bitmap: Bitmap) -> Int? { value(in: bitmap).map { $0 >> 4 } }

  /// The 24 coded bits of a decoded bitmap: item number, then revision.
  static func value(in bitmap: Bitmap) -> Int? {
    let left = Double(bitmap.width) / 10
    let top = Double(bitmap.height) / 10
    let cellWidth = (Double(bitmap.width) - 2 * left) / 4
    let cellHeight = (Double(bitmap.height) - 2 * top) / 4
    var symbols: [Int] = []
    for row in 0..<4 {
      for column in 0..<4 {
        let x = Int(left + (Double(column) + 0.5) * cellWidth)
        let y = Int(top + (Double(row) + 0.5) * cellHeight)
        let offset = (y * bitmap.width + x) * bitmap.channels
        let pixel = (
          Int(bitmap.pixels[offset]), Int(bitmap.pixels[offset + 1]), Int(bitmap.pixels[offset + 2])
        )
        let nearest = palette.indices.min { a, b in
          distance(palette[a], pixel) < distance(palette[b], pixel)
        }!
        symbols.append(nearest)
      }
    }
    var value = 0
    for symbol in symbols.prefix(12) { value = value << 2 | symbol }
    var check = 0
    for symbol in symbols.suffix(4) { check = check << 2 | symbol }
    return check == checksum(value) ? value : nil
  }

  static func code(for item: Int) -> [Int] {
    let check = checksum(item)
    let bits = item << 8 | check
    return (0..<16).map { (bits >> (30 - 2 * $0)) & 3 }
  }

  /// An 8-bit check over the 24-bit value, so a misread cell is caught rather than read as
  /// another item.
  static func checksum(_ value: Int) -> Int {
    var hash = UInt32(truncatingIfNeeded: value) &* 0x9E37_79B1
    hash ^= hash >> 15
    hash = hash &* 0x85EB_CA77
    hash ^= hash >> 13
    return Int(hash & 0xFF)
  }

  private static func distance(_ colour: (UInt8, UInt8, UInt8), _ pixel: (Int, Int, Int)) -> Int {
    abs(Int(colour.0) - pixel.0) + abs(Int(colour.1) - pixel.1) + abs(Int(colour.2) - pixel.2)
  }
}
