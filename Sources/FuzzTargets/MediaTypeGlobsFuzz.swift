import ThumbServer

extension FuzzTarget {
  /// The shared MIME-info database's globs2: `~/.local/share/mime/globs2` is the user's to
  /// write, so any bytes may be there.
  static let mediaTypeGlobs = FuzzTarget(
    name: "mime-globs",
    covers:
      "shared MIME-info globs2 files (MediaTypeGlobs, for thumbd desktop): any text is read without a trap, and a name's type is one of the types the text lists, the same for the name in another case unless a pattern says cs",
    maxLength: 16_384
  ) { bytes in
    let text = String(decoding: bytes, as: UTF8.self)
    var globs = MediaTypeGlobs()
    globs.add(text)
    let listed = Set(
      text.split(separator: "\n").compactMap { line -> String? in
        let fields = line.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
        return fields.count >= 3 ? fields[1].lowercased() : nil
      })
    // Names built from the input's own last bytes, and a few fixed ones.
    let tail = String(decoding: bytes.suffix(12).filter { $0 != 0x2F && $0 != 0 }, as: UTF8.self)
    for name in ["a" + tail, "x.png", "Makefile", tail, "x." + tail] {
      if let type = globs.type(ofName: name) {
        require(listed.contains(type), "\(type) is no type the text lists")
      }
    }
  }
}
