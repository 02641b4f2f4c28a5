/// How a thumbnail is keyed and described in the disk cache.
enum ThumbnailDiskFormat {
  /// The disk key: every field that changes the output bytes, versioned.
  static func key(for request: ImageRequest) -> String {
    let s = request.spec
    return
      "thumb-v1|\(request.url)|\(s.pixelWidth)x\(s.pixelHeight)|\(s.scale)|\(s.fit.rawValue)"
      + "|\(s.format.rawValue)|q\(s.quality)|\(s.allowUpscale ? "up" : "noup")"
  }

  /// The disk key of a source's bytes.
  static func sourceKey(for url: String) -> String { "source-v1|" + url }

  static func metadata(of thumbnail: Thumbnail) -> [UInt8] {
    var out: [UInt8] = [thumbnail.format == .png ? 1 : 0, thumbnail.hasAlpha ? 1 : 0]
    for value in [
      thumbnail.width, thumbnail.height, thumbnail.sourceWidth, thumbnail.sourceHeight,
      thumbnail.orientation,
    ] {
      withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { out += $0 }
    }
    return out
  }

  static func thumbnail(metadata: [UInt8], payload: [UInt8]) -> Thumbnail? {
    guard metadata.count == 22, ImageFormat.sniff(payload) != nil else { return nil }
    func field(_ i: Int) -> Int {
      let base = 2 + i * 4
      return (0..<4).reduce(0) { $0 | Int(metadata[base + $1]) << (8 * $1) }
    }
    return Thumbnail(
      data: payload, format: metadata[0] == 1 ? .png : .jpeg, width: field(0), height: field(1),
      hasAlpha: metadata[1] == 1, sourceWidth: field(2), sourceHeight: field(3),
      orientation: field(4))
  }
}
