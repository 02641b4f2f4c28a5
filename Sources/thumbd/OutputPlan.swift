import ImagePipeline
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// Where each input's thumbnail goes, decided before any work: the kind of output from its
/// spelling (never from the number of inputs), the format of a named file from its
/// extension, and a name for every input without collisions.
enum OutputPlan {
  /// What `--output` names.
  enum Destination: Equatable {
    /// One file, with exactly this path.
    case file(String)
    /// A directory: a trailing `/`, or an existing directory.
    case directory(String)
    /// `-`: the bytes go to standard output.
    case standardOutput
  }

  /// One input's output: an exact path, or a path awaiting the extension of its format.
  struct Target: Sendable {
    let path: String
    let addsExtension: Bool

    /// The file to write for a thumbnail in `format`.
    func resolved(_ format: ImageFormat) -> String {
      addsExtension ? path + "." + format.fileExtension : path
    }

    /// The files an earlier run may have written for this target (`--skip-existing`).
    func candidates(_ format: OutputFormat) -> [String] {
      guard addsExtension else { return [path] }
      switch format {
      case .auto: return [resolved(.jpeg), resolved(.png)]
      case .jpeg: return [resolved(.jpeg)]
      case .png: return [resolved(.png)]
      case .webp: return [resolved(.webp)]
      case .avif: return [resolved(.avif)]
      case .gif: return [resolved(.gif)]
      }
    }
  }

  /// The kind of output `output` spells.
  static func destination(of output: String) -> Destination {
    if output == "-" { return .standardOutput }
    if output.hasSuffix("/") || SystemFiles.isDirectory(output) { return .directory(output) }
    return .file(output)
  }

  /// The format a file name's extension names, if it names one.
  static func format(named path: String) -> OutputFormat? {
    let name = path.split(separator: "/").last.map(String.init) ?? path
    guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return nil }
    switch name[name.index(after: dot)...].lowercased() {
    case "jpg": return .jpeg
    case let name: return OutputFormat(rawValue: name).flatMap { $0 == .auto ? nil : $0 }
    }
  }

  /// The format for an output file: its extension's, or `explicit`; an error when they
  /// disagree, or when neither says.
  static func fileFormat(
    _ path: String, explicit: OutputFormat?
  ) throws(ThumbnailCommand.UsageError) -> OutputFormat {
    let named = format(named: path)
    switch (named, explicit) {
    case (let named?, nil):
      return named
    case (nil, let explicit?):
      return explicit
    case (let named?, let explicit?):
      guard named == explicit else {
        throw .init(
          message: "--format \(explicit.rawValue) disagrees with the output name '\(path)', "
            + "which asks for \(named.rawValue); drop one of them")
      }
      return named
    case (nil, nil):
      throw .init(
        message: "cannot tell the output format from '\(path)'; end it with .jpg, .png, "
          + ".webp, .avif or .gif, give --format, or end it with / for a directory")
    }
  }

  /// One target per file in `directory`: the input's base name (or, with `keepPaths`, its
  /// mirrored path) plus the format's extension. Inputs that would share a name are taken in
  /// path order: the first keeps it, each other gets a suffix from its own path, so the
  /// names are the same on every run over the same inputs.
  static func targets(
    for files: [InputList.File], in directory: String, keepPaths: Bool
  ) -> [Target] {
    let prefix = directory.hasSuffix("/") ? directory : directory + "/"
    let stems = files.map { keepPaths ? stripExtension($0.mirror) : baseName($0.path) }
    let paths = files.map { PathBytes.bytes($0.path) }
    let order = files.indices.sorted { paths[$0].lexicographicallyPrecedes(paths[$1]) }
    var taken: Set<String> = []
    var chosen = [String?](repeating: nil, count: files.count)
    for index in order where taken.insert(stems[index]).inserted {
      chosen[index] = stems[index]
    }
    for index in order where chosen[index] == nil {
      let suffixed = stems[index] + "-" + hex8(files[index].path)
      var candidate = suffixed
      var counter = 2
      while !taken.insert(candidate).inserted {
        candidate = suffixed + "-\(counter)"
        counter += 1
      }
      chosen[index] = candidate
    }
    return chosen.map { Target(path: prefix + $0!, addsExtension: true) }
  }

  /// The last path segment without its extension.
  static func baseName(_ path: String) -> String {
    let file =
      path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
    return stripExtension(file)
  }

  private static func stripExtension(_ path: String) -> String {
    let slash = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
    guard let dot = path[slash...].lastIndex(of: "."), dot != slash else { return path }
    return String(path[..<dot])
  }

  /// Eight hex digits of FNV-1a over the path: stable across runs and machines.
  private static func hex8(_ text: String) -> String {
    let digits = String(FNV1a.hash32(PathBytes.bytes(text)), radix: 16)
    return String(repeating: "0", count: 8 - digits.count) + digits
  }

  /// `mkdir -p`, as a usage error naming the directory.
  static func makeDirectories(_ path: String) throws(ThumbnailCommand.UsageError) {
    guard SystemFiles.makeDirectories(path) else {
      throw .init(message: "cannot create the directory \(path): \(SystemFiles.describe(errno))")
    }
  }
}
