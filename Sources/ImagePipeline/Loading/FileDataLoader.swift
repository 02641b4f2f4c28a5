import CSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Reads `file://` sources confined to configured root directories.
///
/// The path must lie lexically inside a root (which was resolved once, at start); the file is
/// then opened relative to that root by `ts_open_beneath`, so resolution cannot leave it,
/// whatever is swapped for a symlink between a check and the open: there is no check before
/// the open to race with. Symlinks that stay inside the root are followed (openat2's
/// RESOLVE_BENEATH); where openat2 is missing, every symlink is refused. The open descriptor
/// must be a regular file (a FIFO would block; O_NONBLOCK keeps the open itself from
/// blocking), and reads stop at `maxSourceBytes`.
struct FileDataLoader: Sendable {
  let roots: [String]
  let maxSourceBytes: Int
  /// Walk component by component even where openat2 exists: for tests of the fallback.
  let walkOnly: Bool

  init(roots: [String], maxSourceBytes: Int, walkOnly: Bool = false) {
    self.roots = roots.compactMap { Self.realPath($0) }
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
    let (root, relative) = try confine(path)
    let fd = ts_open_beneath(root, relative, O_RDONLY | O_NONBLOCK, walkOnly ? 1 : 0)
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
    guard let (root, relative) = try? confine(path) else { return nil }
    var info = stat()
    let full = root == "/" ? "/" + relative : root + "/" + relative
    guard stat(full, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
    return Self.stamp(of: info)
  }

  /// The root `path` lies in and the path relative to it, by the lexical rules.
  private func confine(_ path: String) throws(FetchError) -> (root: String, relative: String) {
    guard path.hasPrefix("/") else { throw .invalidURL("file URLs need an absolute path") }
    let components = path.split(separator: "/", omittingEmptySubsequences: true)
    guard !components.contains("..") else {
      throw .notAllowed("file paths may not contain '..'")
    }
    let normal = "/" + components.joined(separator: "/")
    guard
      let root = roots.first(where: { normal.hasPrefix($0 == "/" ? "/" : $0 + "/") }),
      normal.count > root.count + 1 || root == "/"
    else { throw .notAllowed("file is outside the configured roots") }
    return (root, String(normal.dropFirst(root == "/" ? 1 : root.count + 1)))
  }

  private static func stamp(of info: stat) -> FileStamp {
    FileStamp(
      device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
      modifiedNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
      changedNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
  }

  private static func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
  }
}
