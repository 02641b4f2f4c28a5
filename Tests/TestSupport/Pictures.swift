import ImagePipeline

/// Solid-colour test pictures, and the colour a thumbnail shows: a changed source is told
/// apart from a stale one by what the picture is, not by bytes.
enum Pictures {
  /// A `size`x`size` PNG of one colour.
  static func solid(_ colour: (UInt8, UInt8, UInt8), size: Int = 32) -> [UInt8] {
    let pixels = [UInt8]((0..<(size * size)).flatMap { _ in [colour.0, colour.1, colour.2] })
    return try! ImageEncoder.png(Bitmap(pixels: pixels, width: size, height: size, channels: 3))
  }

  /// The colour at the centre of an encoded picture, or nil when it does not decode.
  static func centre(of data: [UInt8]) -> (UInt8, UInt8, UInt8)? {
    guard let bitmap = try? Thumbnailer().decodeFullResolution(.bytes(data)) else { return nil }
    let at = ((bitmap.height / 2) * bitmap.width + bitmap.width / 2) * bitmap.channels
    return (bitmap.pixels[at], bitmap.pixels[at + 1], bitmap.pixels[at + 2])
  }

  /// Whether `data` shows `colour` (within JPEG's error).
  static func shows(_ data: [UInt8], _ colour: (UInt8, UInt8, UInt8)) -> Bool {
    guard let seen = centre(of: data) else { return false }
    return abs(Int(seen.0) - Int(colour.0)) <= 8 && abs(Int(seen.1) - Int(colour.1)) <= 8
      && abs(Int(seen.2) - Int(colour.2)) <= 8
  }

  static let red: (UInt8, UInt8, UInt8) = (220, 20, 20)
  static let green: (UInt8, UInt8, UInt8) = (20, 200, 40)
  static let blue: (UInt8, UInt8, UInt8) = (20, 40, 220)
  static let yellow: (UInt8, UInt8, UInt8) = (230, 220, 30)
  static let grey: (UInt8, UInt8, UInt8) = (128, 128, 128)
}
