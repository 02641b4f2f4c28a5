import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// The few file-system and process calls the daemon needs, over POSIX (see `SystemThread`
/// for why not Foundation).
public enum SystemFiles {
  /// The XDG data folders in order of precedence, as the XDG Base Directory Specification
  /// defines them: `$XDG_DATA_HOME` (default `~/.local/share`), then each absolute entry of
  /// `$XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`); no folder twice, none with a
  /// trailing slash.
  public static func dataFolders(environment: [String: String]) -> [String] {
    let home = environment["HOME"] ?? ""
    var dataHome = environment["XDG_DATA_HOME"] ?? ""
    if !dataHome.hasPrefix("/") { dataHome = home.isEmpty ? "" : home + "/.local/share" }
    var dataDirs = (environment["XDG_DATA_DIRS"] ?? "").split(separator: ":").map(String.init)
      .filter { $0.hasPrefix("/") }
    if dataDirs.isEmpty { dataDirs = ["/usr/local/share", "/usr/share"] }
    var folders: [String] = []
    for folder in [dataHome].filter({ !$0.isEmpty }) + dataDirs {
      var path = folder
      while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
      if !folders.contains(path) { folders.append(path) }
    }
    return folders
  }

  /// The whole file at `path`, at most `limit` bytes (nil if it is larger, missing or
  /// unreadable). Only regular files are read: a FIFO would block.
  public static func read(_ path: String, limit: Int = 64 << 20) -> [UInt8]? {
    let fd = PathBytes.withCString(path) { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      if n < 0 { return nil }
      if n == 0 { return bytes }
      guard bytes.count + n <= limit else { return nil }
      bytes += chunk[0..<n]
    }
  }

  /// The names in a directory, `.` and `..` left out; nil if it cannot be read. A name that
  /// is not UTF-8 is kept as `PathBytes` spells it.
  public static func list(_ path: String) -> [String]? {
    guard let directory = PathBytes.withCString(path, { opendir($0) }) else { return nil }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        PathBytes.string(raw.prefix { $0 != 0 })
      }
      if name != "." && name != ".." { names.append(name) }
    }
    return names
  }

  /// Creates `path` and any missing parents (like `mkdir -p`); false on failure.
  @discardableResult
  public static func makeDirectories(_ path: String, mode: mode_t = 0o755) -> Bool {
    if path.isEmpty { return true }
    var prefix = path.hasPrefix("/") ? "/" : ""
    for component in path.split(separator: "/") {
      prefix += component
      if PathBytes.withCString(prefix, { mkdir($0, mode) }) != 0 && errno != EEXIST {
        return false
      }
      prefix += "/"
    }
    return isDirectory(path)
  }

  /// `stat(2)` of `path` (following links), or nil with `errno` set.
  public static func status(_ path: String) -> stat? {
    var info = stat()
    return PathBytes.withCString(path, { stat($0, &info) }) == 0 ? info : nil
  }

  /// `lstat(2)` of `path` (a link itself), or nil with `errno` set.
  public static func linkStatus(_ path: String) -> stat? {
    var info = stat()
    return PathBytes.withCString(path, { lstat($0, &info) }) == 0 ? info : nil
  }

  /// Whether `path` is a directory, or a link to one.
  public static func isDirectory(_ path: String) -> Bool {
    status(path).map { ($0.st_mode & S_IFMT) == S_IFDIR } ?? false
  }

  /// `path` made absolute against the working directory, with `.` and `..` segments and
  /// repeated slashes removed (symlinks are not resolved).
  public static func absolutePath(_ path: String) -> String {
    var full = path
    if !path.hasPrefix("/") {
      var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
      let cwd =
        getcwd(&buffer, buffer.count) != nil
        ? PathBytes.string(buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) })
        : "/"
      full = cwd + "/" + path
    }
    var parts: [Substring] = []
    for part in PathBytes.segments(full) {
      if part.utf8.elementsEqual(".".utf8) { continue }
      if part.utf8.elementsEqual("..".utf8) {
        if !parts.isEmpty { parts.removeLast() }
        continue
      }
      parts.append(part)
    }
    return "/" + parts.joined(separator: "/")
  }

  /// `path` with every symlink resolved (`realpath`), or nil when it cannot be (missing,
  /// unreadable).
  public static func realPath(_ path: String) -> String? {
    guard let resolved = PathBytes.withCString(path, { realpath($0, nil) }) else { return nil }
    defer { free(resolved) }
    return PathBytes.string(UnsafeRawBufferPointer(start: resolved, count: strlen(resolved)))
  }

  /// The directory part of `path` (`/` for top-level entries, `.` for a bare name).
  public static func parent(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
  }

  /// The process environment.
  public static var environment: [String: String] {
    var values: [String: String] = [:]
    var cursor = environ
    while let entry = cursor.pointee {
      let text = String(cString: entry)
      if let equals = text.firstIndex(of: "=") {
        values[String(text[..<equals])] = String(text[text.index(after: equals)...])
      }
      cursor += 1
    }
    return values
  }

  /// The system's words for `errno`.
  public static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}
