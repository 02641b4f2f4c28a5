import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// The desktop's thumbnail cache, as the Thumbnail Managing Standard (0.9) lays it out and as
/// GLib and KIO check it: `$XDG_CACHE_HOME/thumbnails/<flavor>/<md5 of the URI>.png`, PNGs
/// whose text keys (`Thumb::URI`, `Thumb::MTime` and more) come before the image data, so file
/// managers (Thunar, Nautilus, Dolphin) show what thumbd made without making it again.
///
/// Everything read from the directory is treated as hostile: entries are opened without
/// following a final link, must be regular files of bounded size, and only a bounded head is
/// read. Directories are made 0700 and files 0600, written whole and renamed into place.
package struct FreedesktopCache: Sendable {
  /// A thumbnail size the standard names.
  package enum Flavor: String, CaseIterable, Sendable, Hashable {
    /// At most 128x128.
    case normal
    /// At most 256x256.
    case large
    /// At most 512x512.
    case xLarge = "x-large"
    /// At most 1024x1024.
    case xxLarge = "xx-large"

    /// The longest side, in pixels.
    package var size: Int {
      switch self {
      case .normal: 128
      case .large: 256
      case .xLarge: 512
      case .xxLarge: 1024
      }
    }
  }

  /// A source file as the cache judges it: its canonical URI and what `stat` says now.
  package struct Source: Sendable, Hashable {
    /// The absolute path.
    package let path: String
    /// `file://` and the path, percent-encoded as GLib writes it.
    package let uri: String
    /// `st_mtime`, whole seconds.
    package let modified: Int
    /// `st_size`.
    package let size: Int

    /// A source with the given facts (`uri` from `path` unless given).
    package init(path: String, modified: Int, size: Int, uri: String? = nil) {
      self.path = path
      self.uri = uri ?? PercentEncoding.fileURI(path: path)
      self.modified = modified
      self.size = size
    }
  }

  /// What the cache holds for a source.
  package enum Lookup: Sendable, Hashable {
    /// A valid thumbnail, at this path (the user's cache or a shared `.sh_thumbnails`).
    case thumbnail(String)
    /// A valid failure entry: thumbd could not thumbnail this version of the file.
    case failed
    /// Nothing valid: missing, or made for another version of the file.
    case missing
  }

  /// The cache directory (`.../thumbnails`).
  package let directory: String
  /// `Software` in each thumbnail, and the failure folder's name (`fail/thumbd-<version>`).
  package let software: String
  /// The failure entries' folder.
  package var failureDirectory: String {
    directory + "/fail/" + String(software.map { $0 == " " || $0 == "/" ? "-" : $0 })
  }

  /// Entries bigger than this are not read (an xx-large PNG is well under it).
  static let maxEntryBytes = 32 << 20
  /// Bytes of an entry read before its image data, at most.
  static let maxHeadBytes = 64 << 10

  /// A cache at `directory`, writing `software` (e.g. "thumbd 1.2.0") into its entries.
  package init(directory: String, software: String) {
    self.directory = directory
    self.software = software
  }

  /// `$XDG_CACHE_HOME/thumbnails` when that is an absolute path (the base directory
  /// specification ignores a relative one), else `$HOME/.cache/thumbnails`; nil without a home.
  package static func defaultDirectory(environment: [String: String]) -> String? {
    if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") {
      return cache + "/thumbnails"
    }
    guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
    return home + "/.cache/thumbnails"
  }

  /// The file name for a URI: the lowercase hex MD5 of its bytes, then `.png`.
  package static func fileName(forURI uri: String) -> String { MD5.hex(uri.utf8) + ".png" }

  /// Where the thumbnail of `uri` in `flavor` lives.
  package func path(forURI uri: String, flavor: Flavor) -> String {
    directory + "/" + flavor.rawValue + "/" + Self.fileName(forURI: uri)
  }

  /// Whether `path` (absolute) lies inside the cache directory: a thumbnail is never
  /// thumbnailed, nor is anything in a shared `.sh_thumbnails` repository.
  package func holds(_ path: String) -> Bool {
    path.hasPrefix(directory + "/") || path.split(separator: "/").contains(".sh_thumbnails")
  }

  /// The source at `path` (absolute), by `stat`; nil when it cannot be stat'ed.
  package static func source(atPath path: String) -> Source? {
    guard let info = SystemFiles.status(path) else { return nil }
    return Source(path: path, modified: Int(info.st_mtim.tv_sec), size: Int(info.st_size))
  }

  // MARK: - Reading

  /// What the cache holds for `source` in `flavor`: the user's own entry, then a shared
  /// repository beside the file (`.sh_thumbnails/<flavor>/<md5 of the file name>.png`, read
  /// only), then a failure entry.
  package func lookup(_ source: Source, flavor: Flavor) -> Lookup {
    let own = path(forURI: source.uri, flavor: flavor)
    if Self.isValid(entry: own, for: source, uris: [source.uri]) { return .thumbnail(own) }
    if let slash = source.path.lastIndex(of: "/") {
      let folder = source.path[..<slash]
      // Named by the file's escaped name; its URI key is that name, or the absolute URI.
      let relative = PercentEncoding.glibSegment(source.path[source.path.index(after: slash)...])
      let shared =
        folder + "/.sh_thumbnails/" + flavor.rawValue + "/" + Self.fileName(forURI: relative)
      if Self.isValid(entry: shared, for: source, uris: [relative, source.uri]) {
        return .thumbnail(shared)
      }
    }
    let failure = failureDirectory + "/" + Self.fileName(forURI: source.uri)
    if Self.isValid(entry: failure, for: source, uris: [source.uri]) { return .failed }
    return .missing
  }

  /// Whether the entry at `path` is valid for `source` as GLib and KIO judge it: a PNG whose
  /// `Thumb::URI` is one of `uris`, whose `Thumb::MTime` is the source's `st_mtime` as an
  /// integer, and whose `Thumb::Size`, when present, is its `st_size`.
  package static func isValid(entry path: String, for source: Source, uris: [String]) -> Bool {
    guard let keys = texts(ofEntry: path), let uri = keys["Thumb::URI"], uris.contains(uri),
      let mtime = keys["Thumb::MTime"], Self.integer(mtime) == source.modified
    else { return false }
    if let size = keys["Thumb::Size"], Self.integer(size) != source.size { return false }
    return true
  }

  /// The text keys of the entry at `path`; nil when it is not a regular file of bounded size
  /// with a well-formed PNG head (a link, a FIFO, a directory, a damaged file).
  package static func texts(ofEntry path: String) -> [String: String]? {
    withEntry(path) { fd, size in texts(fd, size: size) }
  }

  /// Runs `body` on the open entry at `path` and its size, when it is a regular file (opened
  /// without following a final link) of at most `maxEntryBytes`; nil otherwise.
  static func withEntry<T>(_ path: String, _ body: (Int32, Int) -> T?) -> T? {
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
      info.st_size <= Self.maxEntryBytes
    else { return nil }
    return body(fd, Int(info.st_size))
  }

  /// The text keys of an open entry of `size` bytes, from a bounded head.
  private static func texts(_ fd: Int32, size: Int) -> [String: String]? {
    let limit = min(size, Self.maxHeadBytes)
    return PNGChunks.texts(limit: limit) { offset, count in
      guard offset >= 0, count >= 0, offset + count <= limit else { return nil }
      var bytes = [UInt8](repeating: 0, count: count)
      var filled = 0
      while filled < count {
        let n = bytes.withUnsafeMutableBytes {
          pread(fd, $0.baseAddress! + filled, count - filled, off_t(offset + filled))
        }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { break }
        filled += n
      }
      return Array(bytes[..<filled])
    }
  }

  /// A decimal integer of digits only (what GLib's check accepts: "1700000000.5" is not one).
  static func integer(_ text: String) -> Int? {
    guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 })
    else { return nil }
    return Int(text)
  }

  // MARK: - Writing

  /// Stores `png` (from the thumbnailer, 8-bit and not interlaced) as the thumbnail of
  /// `source` in `flavor`, with the standard's keys before its image data; returns its path.
  package func store(
    png: [UInt8], for source: Source, flavor: Flavor, mediaType: String?,
    imageSize: (width: Int, height: Int)? = nil, movieLength: Duration? = nil
  ) throws(FileIO.WriteError) -> String {
    var keys = [("Thumb::Size", String(source.size))]
    if let mediaType { keys.append(("Thumb::Mimetype", mediaType)) }
    if let imageSize {
      keys.append(("Thumb::Image::Width", String(imageSize.width)))
      keys.append(("Thumb::Image::Height", String(imageSize.height)))
    }
    // The specification's length of a video, in whole seconds.
    if let movieLength, movieLength >= .zero {
      keys.append(("Thumb::Movie::Length", String(Int(movieLength.seconds.rounded()))))
    }
    let folder = directory + "/" + flavor.rawValue
    let target = folder + "/" + Self.fileName(forURI: source.uri)
    try write(png, keys, for: source, to: target, making: [directory, folder])
    return target
  }

  /// Records that `source` (this version of it) cannot be thumbnailed: a small PNG in
  /// `fail/thumbd-<version>/` with its URI and MTime, which `lookup` honours until the file
  /// changes.
  package func storeFailure(for source: Source) throws(FileIO.WriteError) {
    // The smallest valid PNG: one transparent pixel.
    let ihdr: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0]
    let idat: [UInt8] = [0x78, 0x01, 0x63, 0x60, 0x00, 0x02, 0x00, 0x00, 0x05, 0x00, 0x01]
    let png =
      PNGChunks.signature + PNGChunks.chunk("IHDR", ihdr) + PNGChunks.chunk("IDAT", idat)
      + PNGChunks.chunk("IEND", [])
    try write(
      png, [], for: source, to: failureDirectory + "/" + Self.fileName(forURI: source.uri),
      making: [directory, directory + "/fail", failureDirectory])
  }

  /// Writes `png` with the keys every entry carries (URI, MTime, Software) and `extra` before
  /// its image data to `target`, atomically (0600), making `folders` (and the folders above
  /// the cache) first.
  func write(
    _ png: [UInt8], _ extra: [(String, String)], for source: Source, to target: String,
    making folders: [String]
  ) throws(FileIO.WriteError) {
    let keys =
      [
        ("Thumb::URI", source.uri), ("Thumb::MTime", String(source.modified)),
        ("Software", software),
      ]
      + extra
    let chunks = keys.compactMap { PNGChunks.text($0.0, $0.1) }
    guard chunks.count == keys.count, let bytes = PNGChunks.inserting(chunks, intoPNG: png)
    else {
      throw FileIO.WriteError(
        message: "cannot store an entry for \(source.path): not a PNG, or a key it cannot hold",
        code: EINVAL)
    }
    try Self.makeDirectories(Self.ancestors(of: directory) + folders)
    try FileIO.writeAtomically(
      bytes, to: target, temporaryTemplate: SystemFiles.parent(of: target) + "/.thumbd-XXXXXX",
      mode: 0o600)
  }

  /// `/a`, `/a/b` for `/a/b/c`: the folders above the cache, made when missing (a new
  /// account has no `~/.cache`).
  static func ancestors(of path: String) -> [String] {
    let parts = path.split(separator: "/")
    return (1..<max(1, parts.count)).map { "/" + parts[..<$0].joined(separator: "/") }
  }

  /// Makes each directory (0700) that is missing; one that exists must be a directory, not a
  /// link to one.
  static func makeDirectories(_ paths: [String]) throws(FileIO.WriteError) {
    for path in paths {
      if mkdir(path, 0o700) == 0 { continue }
      let code = errno
      var info = stat()
      guard code == EEXIST, lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
        let reason = code == EEXIST ? ENOTDIR : code
        throw FileIO.WriteError(
          message: "cannot make \(path): \(String(cString: strerror(reason)))", code: reason)
      }
    }
  }
}
