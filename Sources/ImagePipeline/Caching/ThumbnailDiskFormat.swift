/// How a thumbnail is keyed and described in the disk cache.
enum ThumbnailDiskFormat {
  /// The disk key: every field that changes the output bytes, the thumbnailer's kernel among them,
  /// versioned (v4: the kernel; v5: geometry, filters or a watermark, length-prefixed after the
  /// colour mode, so v4 keys stay valid). The revision is length-prefixed too, so no URL or
  /// revision can make another request's key.
  static func key(for request: ImageRequest, filter: ResamplingFilter) -> String {
    let s = request.spec
    let rev = request.rev.map { "r\($0.utf8.count):\($0)" } ?? "-"
    let frames = s.keptFrames > 1 ? "frames=\(s.keptFrames)" : ""
    let geometry = [s.geometry.key, s.filters.key, s.watermark?.key ?? "", frames].filter {
      !$0.isEmpty
    }
    .joined(separator: ";")
    return
      "thumb-v\(geometry.isEmpty ? 4 : 5)|\(filter.rawValue)|\(rev)|\(s.pixelWidth)x\(s.pixelHeight)"
      + "|\(s.scale)|\(s.fit.rawValue)|\(s.format.rawValue)|q\(s.quality)"
      + "|\(s.allowUpscale ? "up" : "noup")|\(s.colour.rawValue)"
      + (geometry.isEmpty ? "" : "|g\(geometry.utf8.count):\(geometry)") + "|\(request.url)"
  }

  /// The disk group of every thumbnail of a source (all sizes, formats and revisions).
  static func group(for url: String) -> String { "source|" + url }

  /// The disk key of a source's bytes.
  static func sourceKey(for url: String) -> String { "source-v2|" + url }

  /// The metadata of a source's bytes: its version.
  static func sourceMetadata(_ version: SourceVersion) -> [UInt8] {
    SourceVersionCoding.encode(version)
  }

  /// The version stored with a source's bytes, or nil when it does not decode.
  static func sourceVersion(metadata: [UInt8]) -> SourceVersion? {
    guard let (version, length) = SourceVersionCoding.decode(metadata[...]),
      length == metadata.count
    else { return nil }
    return version
  }

  /// The fixed fields, then the source's version.
  static func metadata(of thumbnail: Thumbnail) -> [UInt8] {
    var out: [UInt8] = [thumbnail.format.diskCode, thumbnail.hasAlpha ? 1 : 0]
    for value in [
      thumbnail.width, thumbnail.height, thumbnail.sourceWidth, thumbnail.sourceHeight,
      thumbnail.orientation,
    ] {
      withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { out += $0 }
    }
    return out + SourceVersionCoding.encode(thumbnail.source)
  }

  static func thumbnail(metadata: [UInt8], payload: [UInt8]) -> Thumbnail? {
    guard metadata.count > 22, let format = ImageFormat(diskCode: metadata[0]),
      ImageFormat.sniff(payload) == format,
      let (version, length) = SourceVersionCoding.decode(metadata[22...]),
      length == metadata.count - 22
    else { return nil }
    func field(_ i: Int) -> Int {
      let base = 2 + i * 4
      return (0..<4).reduce(0) { $0 | Int(metadata[base + $1]) << (8 * $1) }
    }
    return Thumbnail(
      data: payload, format: format, width: field(0), height: field(1),
      hasAlpha: metadata[1] == 1, sourceWidth: field(2), sourceHeight: field(3),
      orientation: field(4), source: version)
  }
}
