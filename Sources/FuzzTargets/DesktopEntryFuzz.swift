import ImagePipeline

extension FuzzTarget {
  /// Desktop thumbnail cache entries: whatever `~/.cache/thumbnails` holds is read as an
  /// attack, and only a bounded head of it.
  static let desktopEntry = FuzzTarget(
    name: "desktop-entry",
    covers:
      "desktop thumbnail cache entries: the PNG head reader never reads past its limit and reads back exactly the text keys an entry built from the input's parts carries; stripping an entry's text chunks (Cache1 Move and Copy) leaves none and never grows it",
    maxLength: 65_536
  ) { bytes in
    let limit = bytes.count / 2 + 8
    var furthest = 0
    _ = PNGChunks.texts(limit: limit) { offset, count in
      require(offset >= 0 && count >= 0 && offset + count <= limit, "read past the limit")
      furthest = max(furthest, offset + count)
      guard offset < bytes.count else { return [] }
      return Array(bytes[offset..<min(bytes.count, offset + count)])
    }
    require(furthest <= limit, "read \(furthest) bytes of \(limit)")
    // Keys and values from the input's lines: an entry built from them reads back to them.
    var keys: [String: String] = [:]
    var chunks: [[UInt8]] = []
    for line in bytes.split(separator: 0x0A).prefix(16) {
      guard let equals = line.firstIndex(of: 0x3D) else { continue }
      let key = String(decoding: line[..<equals].filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self)
      let value = text(Array(line[(equals + 1)...]).filter { $0 != 0 })
      guard keys[key] == nil, let chunk = PNGChunks.text(key, value) else { continue }
      keys[key] = value
      chunks.append(chunk)
    }
    let ihdr: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]
    let png =
      PNGChunks.signature + PNGChunks.chunk("IHDR", ihdr)
      + PNGChunks.chunk("IDAT", [0x78, 0x01, 0x63, 0x60, 0, 0, 0, 2, 0, 1])
    guard let entry = PNGChunks.inserting(chunks, intoPNG: png) else {
      require(false, "a PNG with an IHDR was refused")
      return
    }
    let read = PNGChunks.texts(limit: entry.count) { offset, count in
      Array(entry[offset..<min(entry.count, offset + count)])
    }
    // Latin-1 keys come back as the same code points; values as UTF-8 decodes them.
    let expected = Dictionary(
      uniqueKeysWithValues: keys.map { ($0.key, text(Array($0.value.utf8))) })
    require(read == expected, "an entry's keys did not read back")
    // Retargeting an entry (Cache1 Move/Copy): the input with its text chunks taken out has
    // none left, keeps its signature, and is never longer.
    if let stripped = PNGChunks.removingTexts(fromPNG: bytes) {
      require(stripped.starts(with: PNGChunks.signature), "the signature was lost")
      require(stripped.count <= bytes.count, "stripping made it longer")
      let left = PNGChunks.texts(limit: stripped.count) { offset, count in
        Array(stripped[offset..<min(stripped.count, offset + count)])
      }
      require(left == nil || left == [:], "text chunks were left before the image data")
    }
    // The entry built above, stripped and given its chunks again, reads back the same keys.
    guard let bare = PNGChunks.removingTexts(fromPNG: entry),
      let again = PNGChunks.inserting(chunks, intoPNG: bare)
    else {
      require(false, "an entry's text chunks could not be replaced")
      return
    }
    let reread = PNGChunks.texts(limit: again.count) { offset, count in
      Array(again[offset..<min(again.count, offset + count)])
    }
    require(reread == expected, "a retargeted entry's keys did not read back")
  }
}
