import ImagePipeline

/// Edits of image containers for fixtures: segments and chunks removed, the rest untouched.
enum JPEGSegments {
  struct Malformed: Error {}

  /// The JPEG without its `0xFF marker` segments before the first scan.
  static func stripped(_ jpeg: [UInt8], marker: UInt8) throws -> [UInt8] {
    guard jpeg.count > 4, jpeg[0] == 0xFF, jpeg[1] == 0xD8 else { throw Malformed() }
    var out: [UInt8] = [0xFF, 0xD8]
    var i = 2
    while i + 4 <= jpeg.count {
      guard jpeg[i] == 0xFF else { throw Malformed() }
      let code = jpeg[i + 1]
      if code == 0xDA { break }
      let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
      guard i + 2 + length <= jpeg.count else { throw Malformed() }
      if code != marker { out += jpeg[i..<(i + 2 + length)] }
      i += 2 + length
    }
    return out + jpeg[i...]
  }
}

extension PNGChunks {
  /// The PNG without its chunks of `type`.
  static func stripped(_ png: [UInt8], chunk type: String) throws -> [UInt8] {
    let name = Array(type.utf8)
    guard png.count > 8 else { throw JPEGSegments.Malformed() }
    var out = Array(png[0..<8])
    var i = 8
    while i + 12 <= png.count {
      let length = png[i..<(i + 4)].reduce(0) { $0 << 8 | Int($1) }
      let end = i + 12 + length
      guard end <= png.count else { throw JPEGSegments.Malformed() }
      if Array(png[(i + 4)..<(i + 8)]) != name { out += png[i..<end] }
      i = end
    }
    return out
  }
}
