import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// The files a `thumbnail` or `warm` run works on: the inputs as given, directories walked,
/// `-` read as a list of paths from standard input.
struct InputList {
  /// One file to thumbnail.
  struct File {
    /// The path to open, as given or as reached by a walk.
    let path: String
    /// Where the file sits in the mirrored tree (`--keep-paths`). A named file: its path
    /// without `.` segments, a leading `/` or empty segments (made absolute first when it
    /// holds `..`). A file found in a named directory: the directory's own name, then the
    /// path below it (none for `.`), as `cp -r` and rsync name what they copy.
    let mirror: String
    /// Found by walking a directory, not named: a file there that is not an image is
    /// skipped, not failed.
    let walked: Bool
  }

  /// A path that could not be walked (a loop, an unreadable directory, too deep).
  struct Problem {
    let path: String
    let message: String
  }

  /// A directory's identity, for loops and for leaving the output directory out.
  struct Identity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    init?(_ path: String) {
      guard let info = SystemFiles.status(path) else { return nil }
      self.init(info)
    }

    init(_ info: stat) {
      device = UInt64(info.st_dev)
      inode = UInt64(info.st_ino)
    }
  }

  /// Deeper directories are reported, not walked (a bound on the walk, beyond PATH_MAX).
  static let maxDepth = 64
  /// The longest path read from standard input (Linux's PATH_MAX).
  static let maxListedPath = 4096

  private(set) var files: [File] = []
  private(set) var problems: [Problem] = []
  /// Links leading back to a directory above them: not walked again.
  private(set) var loops: [String] = []
  /// Links met in a walk that lead out of the named directory's tree: not followed, as
  /// `find` and `cp -r` do not (a link to `/` would walk the whole system).
  private(set) var outside: [String] = []
  /// Inputs reached twice (named twice, or through a link): made once.
  private(set) var duplicates = 0
  /// Whether a directory was among the inputs (so there can be many files).
  private(set) var hadDirectory = false
  /// The directories named, and the folders of the files named, as absolute paths: the file
  /// roots that hold every input (`thumbd warm` without configured roots).
  private(set) var roots: [String] = []
  /// Identities of every file in `files`, so an output never replaces an input.
  private(set) var identities: Set<Identity> = []

  private let excluded: Identity?
  private var walkedDirectories: Set<Identity> = []

  /// Expands `inputs`. `excluding` is a directory never walked into (the output directory,
  /// so a second run does not thumbnail the thumbnails of the first).
  init(_ inputs: [String], excluding: Identity?) {
    excluded = excluding
    for input in inputs { add(input, mirror: nil, ancestors: [], depth: 0, tree: nil) }
  }

  /// `inputs` with each `-` replaced by the paths listed on standard input.
  static func expandingLists(
    _ inputs: [String], nulSeparated: Bool
  ) throws(ThumbnailCommand.UsageError) -> [String] {
    var paths: [String] = []
    for input in inputs {
      if input == "-" {
        paths += try readList(nulSeparated: nulSeparated)
      } else {
        paths.append(input)
      }
    }
    return paths
  }

  /// Inputs a run accounts for without working on them: problems, duplicates and loops.
  var setAside: Int { problems.count + duplicates + loops.count + outside.count }

  /// Reads paths from standard input: one per line, or separated by NUL bytes. Empty entries
  /// are ignored; an entry longer than `maxListedPath` is a usage error.
  static func readList(
    from fd: Int32 = STDIN_FILENO, nulSeparated: Bool
  ) throws(ThumbnailCommand.UsageError) -> [String] {
    let separator: UInt8 = nulSeparated ? 0 : UInt8(ascii: "\n")
    var paths: [String] = []
    var current: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    func finish() {
      if !nulSeparated, current.last == UInt8(ascii: "\r") { current.removeLast() }
      if !current.isEmpty { paths.append(PathBytes.string(current)) }
      current.removeAll(keepingCapacity: true)
    }
    while true {
      let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      if n < 0 {
        throw .init(message: "cannot read the list of inputs: \(SystemFiles.describe(errno))")
      }
      if n == 0 { break }
      for byte in chunk[0..<n] {
        if byte == separator {
          finish()
        } else {
          current.append(byte)
          if current.count > maxListedPath {
            throw .init(
              message: "an input listed on standard input is longer than \(maxListedPath) bytes")
          }
        }
      }
    }
    finish()
    return paths
  }

  /// `mirror` is the file's place in the mirrored tree when a walk found it, nil for a named
  /// input; `tree` is then the real path of the named directory the walk started from.
  private mutating func add(
    _ path: String, mirror: String?, ancestors: Set<Identity>, depth: Int, tree: String?
  ) {
    let walked = mirror != nil
    if walked, let tree, let link = SystemFiles.linkStatus(path),
      (link.st_mode & S_IFMT) == S_IFLNK
    {
      // A link is followed only while it stays in the tree.
      guard let real = SystemFiles.realPath(path), real == tree || real.hasPrefix(tree + "/") else {
        outside.append(path)
        return
      }
    }
    if !walked {
      let absolute = SystemFiles.absolutePath(path)
      let root = SystemFiles.isDirectory(path) ? absolute : SystemFiles.parent(of: absolute)
      if !roots.contains(root) { roots.append(root) }
    }
    guard let info = SystemFiles.status(path) else {
      // A dangling link met in a walk is not an input; a named path that is missing fails
      // when it is opened, with the system's words.
      if !walked { append(path, mirror: Self.mirror(of: path), identity: nil, walked: false) }
      return
    }
    let identity = Identity(info)
    guard (info.st_mode & S_IFMT) == S_IFDIR else {
      if walked && (info.st_mode & S_IFMT) != S_IFREG { return }
      append(path, mirror: mirror ?? Self.mirror(of: path), identity: identity, walked: walked)
      return
    }
    hadDirectory = true
    if identity == excluded { return }
    if ancestors.contains(identity) {
      // Every file below it is listed already: said, not failed.
      loops.append(path)
      return
    }
    // A directory reached again through another link holds only files already listed: each
    // is walked once, which also bounds a tree of links that fan out.
    guard walkedDirectories.insert(identity).inserted else { return }
    guard depth < Self.maxDepth else {
      problems.append(.init(path: path, message: "more than \(Self.maxDepth) directories deep"))
      return
    }
    guard let names = SystemFiles.list(path) else {
      problems.append(.init(path: path, message: SystemFiles.describe(errno)))
      return
    }
    var inside = ancestors
    inside.insert(identity)
    let walkTree = tree ?? SystemFiles.realPath(path) ?? SystemFiles.absolutePath(path)
    let prefix = path.hasSuffix("/") ? path : path + "/"
    let mirrorPrefix: String
    if let mirror {
      mirrorPrefix = mirror + "/"
    } else {
      let named = Self.mirror(of: path).split(separator: "/").last.map { String($0) + "/" }
      mirrorPrefix = path.split(separator: "/").allSatisfy { $0 == "." } ? "" : named ?? ""
    }
    // Byte order, so runs (and the names collisions get) do not depend on the directory.
    // Each name's bytes once, not once per comparison.
    let ordered = names.map { (bytes: PathBytes.bytes($0), name: $0) }
      .sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }.map(\.name)
    for name in ordered where !name.hasPrefix(".") {
      add(
        prefix + name, mirror: mirrorPrefix + name, ancestors: inside, depth: depth + 1,
        tree: walkTree)
    }
  }

  private mutating func append(
    _ path: String, mirror: String, identity: Identity?, walked: Bool
  ) {
    if let identity {
      guard identities.insert(identity).inserted else {
        duplicates += 1
        return
      }
    }
    files.append(File(path: path, mirror: mirror, walked: walked))
  }

  /// The path's place in a mirrored tree (see `File.mirror`).
  static func mirror(of path: String) -> String {
    let segments = PathBytes.segments(path)
    if segments.contains(where: { $0.utf8.elementsEqual("..".utf8) }) {
      return String(SystemFiles.absolutePath(path).dropFirst())
    }
    return segments.filter { !$0.utf8.elementsEqual(".".utf8) }.joined(separator: "/")
  }
}
