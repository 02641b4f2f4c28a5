import CSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Reads `file://` sources confined to configured root directories.
///
/// The path must lie lexically inside a root (resolved and opened once, at start: a root
/// renamed or replaced later is not followed); the file is then opened relative to that
/// root's descriptor by `ts_open_beneath_at`, so resolution cannot leave it,
/// whatever is swapped for a symlink between a check and the open: there is no check before
/// the open to race with. Symlinks that stay inside the root are followed (openat2's
/// RESOLVE_BENEATH); where openat2 is missing, every symlink is refused. The open descriptor
/// must be a regular file (a FIFO would block; O_NONBLOCK keeps the open itself from
/// blocking), and reads stop at `maxSourceBytes`.
struct FileDataLoader: Sendable {
  let roots: [RootDirectory]
  let maxSourceBytes: Int
  /// Walk component by component even where openat2 exists: for tests of the fallback.
  let walkOnly: Bool

  /// A root: its real path and a descriptor of it, held for the loader's lifetime.
  final class RootDirectory: Sendable {
    let path: String
    let descriptor: Int32

    init?(_ path: String) {
      guard let real = FileDataLoader.realPath(path) else { return nil }
      let fd = ts_open_root(real)
      guard fd >= 0 else { return nil }
      self.path = real
      descriptor = fd
    }

    deinit { close(descriptor) }
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
    let fd = ts_open_beneath_at(
      confined.root.descriptor, confined.relative, O_RDONLY | O_NONBLOCK, walkOnly ? 1 : 0)
    guard fd >= 0 else {
      switch -fd {
      case ENOENT, ENOTDIR: throw .io("no such file")
      case EXDEV, ELOOP: throw .notAllowed("the path leaves the configured roots")
      default: throw .io("cannot open: \(String(cString: strerror(-fd)))")
      }
    }
    defer { close(fd) }
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
    guard let bytes = FileIO.readAll(fd, expected: Int(info.st_size)) else {
      throw .io("cannot read: \(String(cString: strerror(errno)))")
    }
    let version = SourceVersion(
      validator: .file(stamp), digest: ContentDigest.of(bytes), freshness: freshness,
      lastModified: modified)
    return .modified(bytes, version)
  }

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
    guard fstatat(confined.root.descriptor, confined.relative, &info, 0) == 0,
      (info.st_mode & S_IFMT) == S_IFREG
    else { return nil }
    return stamp(of: info)
  }

  /// The root `path` lies in and the path relative to it, by the lexical rules.
  func confine(_ path: String) throws(FetchError) -> Confined {
    guard path.hasPrefix("/") else { throw .invalidURL("file URLs need an absolute path") }
    let components = path.split(separator: "/", omittingEmptySubsequences: true)
    guard !components.contains("..") else {
      throw .notAllowed("file paths may not contain '..'")
    }
    let normal = "/" + components.joined(separator: "/")
    guard
      let root = roots.first(where: { normal.hasPrefix($0.path == "/" ? "/" : $0.path + "/") }),
      normal.count > root.path.count + 1 || root.path == "/"
    else { throw .notAllowed("file is outside the configured roots") }
    let relative = String(normal.dropFirst(root.path == "/" ? 1 : root.path.count + 1))
    return Confined(root: root, relative: relative)
  }

  private static func stamp(of info: stat) -> FileStamp {
    FileStamp(
      device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
      modifiedNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
      changedNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
  }

  fileprivate static func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
  }
}
