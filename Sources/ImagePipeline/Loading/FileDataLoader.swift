import CSystem
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// Reads `file://` sources confined to configured root directories.
///
/// The path must lie lexically inside a root, spelled as configured or as resolved (each
/// root is resolved and opened once, at start: a root renamed or replaced later is not
/// followed); the file is then opened relative to that root's descriptor by
/// `ts_open_beneath_at`, so resolution cannot leave it, whatever is swapped for a symlink
/// between a check and the open: there is no check before the open to race with. Symlinks
/// that stay inside the root are followed, relative ones by openat2's RESOLVE_BENEATH,
/// absolute ones (and `..` out and back) by resolving to an O_PATH descriptor whose real
/// path must lie below the root before that inode is opened; where openat2 is missing, every
/// symlink is refused. The open descriptor must be a regular file (a FIFO would block;
/// O_NONBLOCK keeps the open itself from blocking), and reads stop at `maxSourceBytes`.
struct FileDataLoader: Sendable {
  let roots: [RootDirectory]
  let maxSourceBytes: Int
  /// Walk component by component even where openat2 exists: for tests of the fallback.
  let walkOnly: Bool

  /// A root: its real path, the spellings a URL may use for it (as configured, made
  /// absolute, and the real path), and a descriptor of it, held for the loader's lifetime.
  final class RootDirectory: Sendable {
    let path: String
    let spellings: [String]
    let descriptor: Int32

    init?(_ path: String) {
      guard case .success(let real) = FileDataLoader.open(root: path) else { return nil }
      let fd = PathBytes.withCString(real) { ts_open_root($0) }
      guard fd >= 0 else { return nil }
      self.path = real
      let configured = SystemFiles.absolutePath(path)
      spellings = configured == real ? [real] : [real, configured]
      descriptor = fd
    }

    deinit { close(descriptor) }
  }

  /// The real path of the root `path`, or why it cannot be one (missing, not a directory,
  /// not readable), naming it.
  static func open(root path: String) -> Result<String, FetchError> {
    guard let real = SystemFiles.realPath(path) else {
      return .failure(.io("\(path): \(SystemFiles.describe(errno))"))
    }
    guard SystemFiles.isDirectory(real) else {
      return .failure(.io("\(path): not a directory"))
    }
    guard PathBytes.withCString(real, { access($0, R_OK | X_OK) }) == 0 else {
      return .failure(.io("\(path): \(SystemFiles.describe(errno))"))
    }
    return .success(real)
  }

  /// A path confined to a root: the root and the path below it.
  struct Confined: Sendable {
    let root: RootDirectory
    let relative: String
  }

  init(roots: [String], maxSourceBytes: Int, walkOnly: Bool = false) {
    self.roots = roots.compactMap(RootDirectory.init)
    self.maxSourceBytes = maxSourceBytes
    self.walkOnly = walkOnly
  }

  /// The bytes of `path`.
  func load(path: String) throws(FetchError) -> [UInt8] {
    switch try load(path: path, unlessStamped: nil, freshness: .forever) {
    case .modified(let bytes, _): return bytes
    case .notModified: return []
    }
  }

  /// The bytes and version of `path`, stamped by the `fstat` of the descriptor they are read
  /// from; `.notModified` without reading when that stamp equals `cached`.
  func load(path: String, unlessStamped cached: SourceValidator?, freshness: Freshness)
    throws(FetchError) -> SourceResponse
  {
    let confined = try confine(path)
    let fd = PathBytes.withCString(confined.root.path) { root in
      PathBytes.withCString(confined.relative) { relative in
        ts_open_beneath_at(
          confined.root.descriptor, root, relative, O_RDONLY | O_NONBLOCK, walkOnly ? 1 : 0)
      }
    }
    guard fd >= 0 else {
      switch -fd {
      case ENOENT, ENOTDIR: throw .io("no such file")
      case EXDEV, ELOOP: throw .notAllowed("the path leaves the configured roots")
      case ENODEV: throw .notAllowed("not a regular file")
      default: throw .io("cannot open: \(String(cString: strerror(-fd)))")
      }
    }
    defer { close(fd) }
    // A file rewritten in place while it is read gives bytes of neither version: when its
    // stamp changed during the read, it is read once more (a torn read was refused as corrupt).
    // Bytes read while it kept changing carry the stamp from before them, which the next
    // request's `stat` finds changed.
    var attempt = 1
    while true {
      var info = stat()
      guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
        throw .notAllowed("not a regular file")
      }
      let stamp = Self.stamp(of: info)
      let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
      if cached == .file(stamp) {
        return .notModified(
          SourceVersion(
            validator: .file(stamp), digest: 0, freshness: freshness, lastModified: modified))
      }
      guard Int(info.st_size) <= maxSourceBytes else { throw .tooLarge(limit: maxSourceBytes) }
      guard attempt == 1 || lseek(fd, 0, SEEK_SET) == 0,
        let bytes = FileIO.readAll(fd, expected: Int(info.st_size))
      else {
        throw .io("cannot read: \(String(cString: strerror(errno)))")
      }
      var after = stat()
      let unchanged = fstat(fd, &after) == 0 && Self.stamp(of: after) == stamp
      if unchanged || attempt == Self.readAttempts {
        let version = SourceVersion(
          validator: .file(stamp), digest: ContentDigest.of(bytes), freshness: freshness,
          lastModified: modified)
        return .modified(bytes, version)
      }
      attempt += 1
    }
  }

  /// Reads of one file whose stamp changed while it was read, before its bytes are taken as
  /// they are.
  static let readAttempts = 2

  /// The stamp of what `path` names now, by one `stat`, or nil. Not opened beneath the root
  /// as loads are: a stamp only decides whether to load again, and a path swapped for a
  /// symlink out of the root stamps differently (another inode), so the load that follows
  /// refuses it.
  func stamp(path: String) -> FileStamp? {
    (try? confine(path)).flatMap(Self.stamp(of:))
  }

  /// The stamp of a confined path, by one `fstatat` from its root's descriptor: the kernel
  /// walks only the components below the root (a full path's walk was most of the stat's
  /// cost on the memory-hit benchmark).
  static func stamp(of confined: Confined) -> FileStamp? {
    var info = stat()
    guard
      PathBytes.withCString(confined.relative, { fstatat(confined.root.descriptor, $0, &info, 0) })
        == 0,
      (info.st_mode & S_IFMT) == S_IFREG
    else { return nil }
    return stamp(of: info)
  }

  /// The root `path` lies in and the path relative to it, by the lexical rules.
  func confine(_ path: String) throws(FetchError) -> Confined {
    guard path.hasPrefix("/") else { throw .invalidURL("file URLs need an absolute path") }
    let components = PathBytes.segments(path)
    guard !components.contains(where: { $0.utf8.elementsEqual("..".utf8) }) else {
      throw .notAllowed("file paths may not contain '..'")
    }
    let normal = "/" + components.joined(separator: "/")
    for root in roots {
      for spelling in root.spellings {
        let prefix = spelling == "/" ? "/" : spelling + "/"
        // Bytes, not Characters: a root is matched exactly as the file system spells it.
        if normal.utf8.starts(with: prefix.utf8) && normal.utf8.count > prefix.utf8.count {
          let relative = String(decoding: normal.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
          return Confined(root: root, relative: relative)
        }
      }
    }
    guard !roots.isEmpty else { throw .notAllowed(Self.noRoots) }
    throw .notAllowed("file is outside the configured roots")
  }

  /// What a `file://` request is told when no root is configured: how to add one.
  static let noRoots =
    "no file roots are configured: start thumbd with --file-root DIR (config key file_roots, "
    + "THUMBD_FILE_ROOTS) to serve the files below DIR"

  private static func stamp(of info: stat) -> FileStamp {
    FileStamp(
      device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
      modifiedNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
      changedNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
  }
}
