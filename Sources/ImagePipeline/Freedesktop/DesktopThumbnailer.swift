import CSystem
import ThumbWire

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
    /// in no format thumbd reads (or one it reads with nothing to show: a camera RAW without a
    /// preview), or the work was cancelled. The reason, in words.
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
  /// header (`Thumbnailer.estimate`, with what the process keeps from a decoder's first run),
  /// opened and checked as `thumbnail` does: 0 when the file
  /// will be refused or its header does not parse (the decode then says why). The file may
  /// change before the decode opens it again; the decoder's own limits still hold then.
  /// Blocking file I/O: call it off the cooperative pool.
  package func estimate(path: String, flavor: FreedesktopCache.Flavor) -> Int {
    guard path.hasPrefix("/"), !cache.holds(path) else { return 0 }
    let fd = PathBytes.withCString(path) {
      Glibc.open($0, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
    }
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    guard case .success = Self.check(fd, maxBytes: maxSourceBytes) else { return 0 }
    let spec = ThumbnailSpec(width: flavor.size, height: flavor.size, format: .png)
    guard let estimate = try? thumbnailer.estimate(.descriptor(fd), spec: ValidSpec(spec)) else {
      return 0
    }
    return estimate.bytes + estimate.firstUse
  }

  /// A file opened once and checked, with the flavors the cache still lacks (largest
  /// first): what either way of making its thumbnails starts from.
  package struct Opened: ~Copyable {
    /// The open file (closed when this goes).
    package let descriptor: Int32
    /// The file as the cache names and checks it.
    package let source: FreedesktopCache.Source
    /// The flavors to make, largest first (never empty).
    package let wanted: [FreedesktopCache.Flavor]

    deinit { close(descriptor) }
  }

  /// Opens the file at `path` (absolute) and asks the cache about each of `flavors`: the
  /// opened file when some flavor must be made, or the outcome when none must (all cached,
  /// a failure entry) or the file is refused.
  package func open(
    path: String, flavors: Set<FreedesktopCache.Flavor>
  ) -> Result<Opened, OutcomeBox> {
    guard path.hasPrefix("/") else {
      return .failure(
        OutcomeBox(.refused(kind: "invalid_spec", message: "the path is not absolute")))
    }
    if cache.holds(path) {
      return .failure(
        OutcomeBox(.refused(kind: "not_allowed", message: "the file is in a thumbnail cache")))
    }
    let fd = PathBytes.withCString(path) {
      Glibc.open($0, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
    }
    guard fd >= 0 else {
      return .failure(
        OutcomeBox(
          .refused(kind: "io", message: "cannot open: \(String(cString: strerror(errno)))")))
    }
    let info: stat
    switch Self.check(fd, maxBytes: maxSourceBytes) {
    case .failure(let refusal):
      close(fd)
      return .failure(OutcomeBox(refusal.outcome))
    case .success(let checked): info = checked
    }
    let source = FreedesktopCache.Source(
      path: path, modified: Int(info.st_mtim.tv_sec), size: Int(info.st_size))
    var wanted: [FreedesktopCache.Flavor] = []
    for flavor in FreedesktopCache.Flavor.allCases.reversed() where flavors.contains(flavor) {
      switch cache.lookup(source, flavor: flavor) {
      case .thumbnail: continue
      case .failed:
        close(fd)
        return .failure(OutcomeBox(.failedBefore))
      case .missing: wanted.append(flavor)
      }
    }
    guard !wanted.isEmpty else {
      close(fd)
      return .failure(OutcomeBox(.cached))
    }
    return .success(Opened(descriptor: fd, source: source, wanted: wanted))
  }

  /// An outcome as an error, so `open` can return it in a `Result`.
  package struct OutcomeBox: Error {
    /// The outcome.
    package let outcome: Outcome
    init(_ outcome: Outcome) { self.outcome = outcome }
  }

  /// The media types thumbd makes thumbnails of itself: its image formats, and videos and
  /// drawings (PDF, SVG) when it has `frames` (`Thumbnailer.frames`).
  package static func mediaTypes(frames: Bool) -> [String] {
    SourceFormat.desktopMediaTypes + (frames ? FrameSource.desktopMediaTypes : [])
  }

  /// The media types this thumbnailer makes itself.
  package var mediaTypes: [String] { Self.mediaTypes(frames: thumbnailer.frames != nil) }

  /// Whether the file's first bytes are in a format thumbd decodes itself (a video's or a
  /// drawing's, when it has frames).
  package func reads(_ opened: borrowing Opened) -> Bool { mediaType(of: opened) != nil }

  /// The media type of what the file holds, when thumbd reads it: by content, never by name.
  private func mediaType(of opened: borrowing Opened) -> String? {
    let length = FrameSource.sniffLength
    var head = [UInt8](repeating: 0, count: length)
    let read = head.withUnsafeMutableBytes { pread(opened.descriptor, $0.baseAddress!, length, 0) }
    guard read > 0 else { return nil }
    if let format = SourceFormat.sniff(head[..<read]) { return format.mediaType }
    guard thumbnailer.frames != nil else { return nil }
    return FrameSource.sniff(head[..<read])?.mediaType
  }

  /// Thumbnails the file at `path` (absolute) in each of `flavors`. `decoded` hears what
  /// became of the source's colour profile when the file was decoded (not for an answer from
  /// the cache).
  package func thumbnail(
    path: String, flavors: Set<FreedesktopCache.Flavor>, cancellation: CancellationFlag? = nil,
    decoded: (ProfileOutcome) -> Void = { _ in }
  ) -> Outcome {
    let opened: Opened
    switch open(path: path, flavors: flavors) {
    case .failure(let box): return box.outcome
    case .success(let file): opened = file
    }
    guard let mediaType = mediaType(of: opened) else {
      return .refused(kind: "unsupported_format", message: "not an image thumbd reads")
    }
    let largest = opened.wanted[0]
    let descriptor = opened.descriptor
    let name = String(path.split(separator: "/").last ?? "")
    return make(opened, mediaType: mediaType, cancellation: cancellation) {
      () throws(ThumbnailError) in
      let spec = ThumbnailSpec(width: largest.size, height: largest.size, format: .png)
      let first = try thumbnailer.thumbnail(
        .descriptor(descriptor, name: name), spec: ValidSpec(spec), cancellation: cancellation)
      decoded(first.profile)
      let size = (first.sourceWidth, first.sourceHeight)
      return Made(
        png: first.data, size: first.orientation >= 5 ? (size.1, size.0) : size,
        duration: first.duration)
    }
  }

  /// The largest flavor's picture, as `make` is given it.
  package struct Made {
    /// A PNG, already upright and sRGB.
    package var png: [UInt8]
    /// The source's upright size, when known.
    package var size: (Int, Int)?
    /// A video's length, when known (`Thumb::Movie::Length`).
    package var duration: Duration?

    /// The picture `png` of a source `size` large, `duration` long.
    package init(png: [UInt8], size: (Int, Int)?, duration: Duration? = nil) {
      self.png = png
      self.size = size
      self.duration = duration
    }
  }

  /// Makes `opened`'s wanted flavors: the largest by `largest`, the smaller ones from it. A
  /// failure other than a cancellation or a write's is recorded as a failure entry.
  package func make(
    _ opened: borrowing Opened, mediaType: String, cancellation: CancellationFlag?,
    largest: () throws(ThumbnailError) -> Made
  ) -> Outcome {
    var made: [FreedesktopCache.Flavor: String] = [:]
    do throws(ThumbnailError) {
      let picture = try largest()
      let (first, upright) = (picture.png, picture.size)
      let source = opened.source
      func store(_ png: [UInt8], _ flavor: FreedesktopCache.Flavor) throws(ThumbnailError)
        -> String
      {
        try self.store(png, source, flavor, mediaType, upright, picture.duration)
      }
      made[opened.wanted[0]] = try store(first, opened.wanted[0])
      for flavor in opened.wanted.dropFirst() {
        // From the larger thumbnail: already upright, already sRGB.
        let smaller = try thumbnailer.thumbnail(
          .bytes(first),
          spec: ValidSpec(ThumbnailSpec(width: flavor.size, height: flavor.size, format: .png)),
          cancellation: cancellation)
        made[flavor] = try store(smaller.data, flavor)
      }
    } catch {
      if case .cancelled = error { return .refused(kind: error.kind, message: error.message) }
      // Read, but nothing thumbd can show (a camera RAW without a preview): no failure entry,
      // so an installed thumbnailer may still make it (DesktopJobs' fallback).
      if case .unsupportedFormat = error {
        return .refused(kind: error.kind, message: error.message)
      }
      if case .io = error { return .failed(error) }
      try? cache.storeFailure(for: opened.source)
      return .failed(error)
    }
    return .made(made)
  }

  private func store(
    _ png: [UInt8], _ source: FreedesktopCache.Source, _ flavor: FreedesktopCache.Flavor,
    _ mediaType: String, _ size: (Int, Int)?, _ duration: Duration?
  ) throws(ThumbnailError) -> String {
    do {
      return try cache.store(
        png: png, for: source, flavor: flavor, mediaType: mediaType,
        imageSize: size.map { ($0.0, $0.1) }, movieLength: duration)
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
