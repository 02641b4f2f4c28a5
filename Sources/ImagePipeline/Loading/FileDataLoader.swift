#if canImport(Glibc)
  import Glibc
#endif

/// Reads `file://` sources confined to configured root directories.
///
/// A path is refused when it has a `..` component, when resolving its symlinks leads outside
/// every root, or when it is not a regular file. The file is then opened without following a
/// final symlink and checked again through the open descriptor, so swapping the file between
/// the check and the read does not escape the roots. Reads stop at `maxSourceBytes`.
struct FileDataLoader: Sendable {
  let roots: [String]
  let maxSourceBytes: Int

  init(roots: [String], maxSourceBytes: Int) {
    self.roots = roots.compactMap { Self.realPath($0) }
    self.maxSourceBytes = maxSourceBytes
  }

  func load(path: String) throws(FetchError) -> [UInt8] {
    guard path.hasPrefix("/") else { throw .invalidURL("file URLs need an absolute path") }
    guard !path.split(separator: "/").contains("..") else {
      throw .notAllowed("file paths may not contain '..'")
    }
    guard let resolved = Self.realPath(path) else { throw .io("no such file") }
    guard roots.contains(where: { resolved == $0 || resolved.hasPrefix($0 + "/") }) else {
      throw .notAllowed("file is outside the configured roots")
    }
    let fd = open(resolved, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { throw .io("cannot open: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
      throw .notAllowed("not a regular file")
    }
    guard Int(info.st_size) <= maxSourceBytes else { throw .tooLarge(limit: maxSourceBytes) }
    guard let bytes = FileIO.readAll(fd, expected: Int(info.st_size)) else {
      throw .io("cannot read: \(String(cString: strerror(errno)))")
    }
    return bytes
  }

  private static func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
  }
}
