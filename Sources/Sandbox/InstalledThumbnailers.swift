import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// The installed `*.thumbnailer` entries, by MIME type, as gnome-desktop chooses them: the
/// folders in order (`$XDG_DATA_HOME/thumbnailers`, then each `$XDG_DATA_DIRS` entry's), and
/// for each type the first entry found wins. Within a folder, entries are read in name order.
///
/// An entry is used only when its program runs in the sandbox: `TryExec` (when given) and
/// the `Exec` program exist, and the program lies under `/usr` (all the sandbox shows).
/// thumbd's own entry is skipped. What was skipped, and why, is kept for logs.
public struct InstalledThumbnailers: Sendable {
  /// One usable entry: the entry, with its program as an absolute path under `/usr`.
  public struct Usable: Sendable, Equatable {
    /// The entry, `arguments[0]` its program's path.
    public var entry: ThumbnailerEntry
  }

  /// The entry for each MIME type.
  public let byType: [String: Usable]
  /// Entry files not used, with the reason.
  public let skipped: [(source: String, reason: String)]

  /// The most entry files read from one folder.
  public static let maxFilesPerFolder = 512

  /// The folders to read, in order of precedence, from the environment as the XDG Base
  /// Directory Specification defines them.
  public static func folders(environment: [String: String]) -> [String] {
    SystemFiles.dataFolders(environment: environment).map { $0 + "/thumbnailers" }
  }

  /// Reads the entries in `folders`. `isOwn` says whether a program is thumbd itself.
  public static func load(
    folders: [String], isOwn: (String) -> Bool = InstalledThumbnailers.isThumbd
  ) -> InstalledThumbnailers {
    var byType: [String: Usable] = [:]
    var skipped: [(String, String)] = []
    for folder in folders {
      guard let names = SystemFiles.list(folder) else { continue }
      let entries = names.filter { $0.hasSuffix(".thumbnailer") && !$0.hasPrefix(".") }.sorted()
      for (index, name) in entries.enumerated() {
        let path = folder + "/" + name
        guard index < maxFilesPerFolder else {
          skipped.append((path, "over \(maxFilesPerFolder) entries in the folder"))
          continue
        }
        guard let bytes = SystemFiles.read(path, limit: ThumbnailerEntry.maxBytes + 1) else {
          skipped.append((path, "unreadable"))
          continue
        }
        var entry: ThumbnailerEntry
        do {
          entry = try ThumbnailerEntry.parse(bytes, source: path)
        } catch {
          skipped.append((path, error.reason))
          continue
        }
        if let tryExec = entry.tryExec, resolve(tryExec) == nil {
          skipped.append((path, "TryExec \(tryExec) is not installed"))
          continue
        }
        guard let program = resolve(entry.program) else {
          skipped.append((path, "\(entry.program) is not installed"))
          continue
        }
        guard let real = SystemFiles.realPath(program), insideUsr(real) else {
          skipped.append((path, "\(program) is outside /usr, which the sandbox does not show"))
          continue
        }
        guard !isOwn(real) else {
          skipped.append((path, "thumbd's own entry"))
          continue
        }
        entry.arguments[0] = program
        for type in entry.mimeTypes where byType[type] == nil {
          byType[type] = Usable(entry: entry)
        }
      }
    }
    return InstalledThumbnailers(byType: byType, skipped: skipped)
  }

  /// Whether `path` (resolved) is this thumbd or a program named thumbd.
  public static func isThumbd(_ path: String) -> Bool {
    if path.split(separator: "/").last == "thumbd" { return true }
    return SystemFiles.realPath("/proc/self/exe") == path
  }

  /// `program` as an absolute path: itself when absolute and executable, else the first
  /// executable of that name in the folders the sandbox shows.
  static func resolve(_ program: String) -> String? {
    if program.hasPrefix("/") { return access(program, X_OK) == 0 ? program : nil }
    guard !program.contains("/") else { return nil }
    return ["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map { $0 + "/" + program }
      .first { access($0, X_OK) == 0 }
  }

  private static func insideUsr(_ path: String) -> Bool { path.hasPrefix("/usr/") }
}

extension InstalledThumbnailers.Usable {
  /// The output's name inside the sandbox's output folder.
  public static let outputName = "thumbnail.png"

  /// Runs the entry in `sandbox` on the open file `input` (named `name` on the host: only
  /// its extension reaches the child), asking for `size` pixels. The output is read back
  /// with a bound of `outputLimit` bytes, never through a link; what it holds is still
  /// untrusted, for the caller's own decoder. The run's folder is gone when this returns.
  /// Blocks the calling thread until the run ends, its deadline passes or `cancellation`.
  public func run(
    input: Int32, name: String, size: Int, in sandbox: Sandbox, outputLimit: Int,
    cancellation: SandboxCancellation? = nil
  ) -> DelegatedOutput {
    var job = SandboxJob(arguments: [], input: input, inputName: SandboxJob.inputName(for: name))
    job.arguments = entry.expand(
      input: job.inputPath, output: Sandbox.outputFolder + "/" + Self.outputName, size: size)
    let run = sandbox.run(job, cancellation: cancellation)
    defer { run.discard() }
    guard run.outcome == .exited(0) else {
      return DelegatedOutput(run: run, bytes: nil, problem: "the thumbnailer \(run.outcome)")
    }
    let path = run.outputFolder + "/" + Self.outputName
    let file = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
    guard file >= 0 else {
      return DelegatedOutput(run: run, bytes: nil, problem: "the thumbnailer wrote no image")
    }
    defer { close(file) }
    var status = stat()
    guard fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
      return DelegatedOutput(run: run, bytes: nil, problem: "the thumbnailer's output is no file")
    }
    guard status.st_size > 0, status.st_size <= outputLimit else {
      return DelegatedOutput(
        run: run, bytes: nil, problem: "the thumbnailer's output is \(status.st_size) bytes")
    }
    var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
    var filled = 0
    while filled < bytes.count {
      let count = bytes.withUnsafeMutableBytes {
        read(file, $0.baseAddress! + filled, $0.count - filled)
      }
      guard count > 0 else { break }
      filled += count
    }
    guard filled == bytes.count else {
      return DelegatedOutput(run: run, bytes: nil, problem: "the thumbnailer's output was cut")
    }
    return DelegatedOutput(run: run, bytes: bytes, problem: nil)
  }
}

/// What an installed thumbnailer gave back: its bytes (untrusted) or why there are none.
public struct DelegatedOutput: Sendable {
  /// The sandboxed run (its folder already removed).
  public let run: SandboxRun
  /// The output file's bytes, at most the limit asked for.
  public let bytes: [UInt8]?
  /// Why there are no bytes.
  public let problem: String?
}
