import CSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Makes the desktop's thumbnails of local files into a `FreedesktopCache`: the cache is asked
/// first (a valid entry, the user's or a shared one, or a failure entry, is the answer), then
/// the file is opened once, checked (a regular file, not in /proc or /sys, within the byte
/// limit, not inside a thumbnail directory), and decoded from that descriptor. The largest
/// flavor asked for is made from the source; smaller ones are made from it.
package struct DesktopThumbnailer: Sendable {
  /// What became of a file.
  package enum Outcome: Sendable, Hashable {
    /// Made now: the path of each flavor's entry.
    case made([FreedesktopCache.Flavor: String])
    /// Every flavor asked for was already valid in the cache.
    case cached
    /// A failure entry says this version of the file cannot be thumbnailed.
    case failedBefore
    /// Not thumbnailed, and no failure recorded: not a regular file, in the thumbnail cache,
    /// in no format thumbd reads, or the work was cancelled. The reason, in words.
    case refused(kind: String, message: String)
    /// The decode failed; a failure entry now records it.
    case failed(ThumbnailError)
  }

  /// The cache written to.
  package let cache: FreedesktopCache
  /// The decoder (its limits apply: pixels, decode time, memory).
  package let thumbnailer: Thumbnailer
  /// Larger files are refused before any byte is read.
  package let maxSourceBytes: Int

  /// A thumbnailer writing into `cache`.
  package init(cache: FreedesktopCache, thumbnailer: Thumbnailer, maxSourceBytes: Int) {
    self.cache = cache
    self.thumbnailer = thumbnailer
    self.maxSourceBytes = maxSourceBytes
  }

  /// The working memory thumbnailing the file at `path` in `flavor` will need, from its
  /// header (`Thumbnailer.estimate`), opened and checked as `thumbnail` does: 0 when the file
  /// will be refused or its header does not parse (the decode then says why). The file may
  /// change before the decode opens it again; the decoder's own limits still hold then.
  /// Blocking file I/O: call it off the cooperative pool.
  package func estimate(path: String, flavor: FreedesktopCache.Flavor) -> Int {
    guard path.hasPrefix("/"), !cache.holds(path) else { return 0 }
    let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    guard case .success = Self.check(fd, maxBytes: maxSourceBytes) else { return 0 }
    let spec = ThumbnailSpec(width: flavor.size, height: flavor.size, format: .png)
    return (try? thumbnailer.estimate(ofFile: fd, spec: spec))?.bytes ?? 0
  }

  /// Thumbnails the file at `path` (absolute) in each of `flavors`. `decoded` hears what
  /// became of the source's colour profile when the file was decoded (not for an answer from
  /// the cache).
  package func thumbnail(
    path: String, flavors: Set<FreedesktopCache.Flavor>, cancellation: CancellationFlag? = nil,
    decoded: (ProfileOutcome) -> Void = { _ in }
  ) -> Outcome {
    guard path.hasPrefix("/") else {
      return .refused(kind: "invalid_spec", message: "the path is not absolute")
    }
    if cache.holds(path) {
      return .refused(kind: "not_allowed", message: "the file is in a thumbnail cache")
    }
    let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
    guard fd >= 0 else {
      return .refused(kind: "io", message: "cannot open: \(String(cString: strerror(errno)))")
    }
    defer { close(fd) }
    let info: stat
    switch Self.check(fd, maxBytes: maxSourceBytes) {
    case .failure(let refusal): return refusal.outcome
    case .success(let checked): info = checked
    }
    let source = FreedesktopCache.Source(
      path: path, modified: Int(info.st_mtim.tv_sec), size: Int(info.st_size))
    var wanted: [FreedesktopCache.Flavor] = []
    for flavor in FreedesktopCache.Flavor.allCases.reversed() where flavors.contains(flavor) {
      switch cache.lookup(source, flavor: flavor) {
      case .thumbnail: continue
      case .failed: return .failedBefore
      case .missing: wanted.append(flavor)
      }
    }
    guard let largest = wanted.first else { return .cached }
    var head = [UInt8](repeating: 0, count: 32)
    let read = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, 32, 0) }
    guard read > 0, let format = SourceFormat.sniff(head[..<read]) else {
      return .refused(kind: "unsupported_format", message: "not an image thumbd reads")
    }
    var made: [FreedesktopCache.Flavor: String] = [:]
    do throws(ThumbnailError) {
      let spec = ThumbnailSpec(width: largest.size, height: largest.size, format: .png)
      let first = try thumbnailer.thumbnail(ofFile: fd, spec: spec, cancellation: cancellation)
      decoded(first.profile)
      let size = (first.sourceWidth, first.sourceHeight)
      let upright = first.orientation >= 5 ? (size.1, size.0) : size
      made[largest] = try store(first.data, source, largest, format, upright)
      for flavor in wanted.dropFirst() {
        // From the larger thumbnail: already upright, already sRGB.
        let smaller = try thumbnailer.thumbnail(
          of: first.data,
          spec: ThumbnailSpec(width: flavor.size, height: flavor.size, format: .png),
          cancellation: cancellation)
        made[flavor] = try store(smaller.data, source, flavor, format, upright)
      }
    } catch {
      if case .cancelled = error { return .refused(kind: error.kind, message: error.message) }
      if case .io = error { return .failed(error) }
      try? cache.storeFailure(for: source)
      return .failed(error)
    }
    return .made(made)
  }

  private func store(
    _ png: [UInt8], _ source: FreedesktopCache.Source, _ flavor: FreedesktopCache.Flavor,
    _ format: SourceFormat, _ size: (Int, Int)
  ) throws(ThumbnailError) -> String {
    do {
      return try cache.store(
        png: png, for: source, flavor: flavor, mediaType: format.mediaType,
        imageSize: (size.0, size.1))
    } catch {
      throw .io(error.message)
    }
  }

  /// Why an open file is refused.
  struct Refusal: Error {
    let outcome: Outcome
    init(_ kind: String, _ message: String) { outcome = .refused(kind: kind, message: message) }
  }

  /// The open file's `stat`, or why it is refused: not a regular file (a FIFO, a device, a
  /// directory), a file of /proc or /sys (their sizes lie), empty, or over `maxBytes`.
  static func check(_ fd: Int32, maxBytes: Int) -> Result<stat, Refusal> {
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      return .failure(Refusal("io", "cannot stat: \(String(cString: strerror(errno)))"))
    }
    guard info.st_mode & S_IFMT == S_IFREG else {
      return .failure(Refusal("io", "not a regular file"))
    }
    if ts_is_pseudo_file(fd) == 1 {
      return .failure(Refusal("io", "a file of /proc, /sys or another pseudo file system"))
    }
    guard info.st_size > 0 else { return .failure(Refusal("truncated", "the file is empty")) }
    guard Int(info.st_size) <= maxBytes else {
      return .failure(Refusal("source_too_large", "the file is larger than \(maxBytes) bytes"))
    }
    return .success(info)
  }
}
