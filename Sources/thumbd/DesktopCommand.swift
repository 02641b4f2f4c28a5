import ImagePipeline
import Sandbox
import Synchronization
import ThumbServer
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// `thumbd desktop`: fills the desktop's thumbnail cache (`~/.cache/thumbnails`, the
/// Thumbnail Managing Standard's), which Thunar, Nautilus, Dolphin and GLib read: a folder
/// opened after the run shows thumbd's thumbnails and makes none of its own.
enum DesktopCommand {
  static let usage = """
    thumbd desktop: fill the desktop's thumbnail cache, which file managers read.

    Usage:
      thumbd desktop INPUT... [--flavors LIST] [--cache-dir DIR] [--jobs N]
                     [--max-pixels N] [--max-source-bytes SIZE] [-0] [-v] [-q]

    INPUTs are files and directories (walked as 'thumbd thumbnail' walks them)
    or '-' (a list on standard input, -0 for NUL-separated). Each file gets the
    thumbnail a file manager would look for: a PNG named by the MD5 of its
    file:// URI, with Thumb::URI, Thumb::MTime (whole seconds), Thumb::Size,
    Thumb::Mimetype and Software before the image data; folders 0700, files
    0600. Thumbnails that are valid already (in the cache or in a shared
    .sh_thumbnails folder beside the file) are kept; stale ones (the file
    changed since, or a fractional MTime GLib refuses) are made anew. A file
    that cannot be thumbnailed gets an entry in fail/thumbd-VERSION/, honoured
    until the file changes. Sources smaller than a flavor are not enlarged.

    Files of the types thumbd does not decode (videos, PDFs, SVG, TIFF, BMP,
    fonts...) are made by the installed thumbnailers (*.thumbnailer entries),
    each run in a bubblewrap sandbox; their type comes from the file's name.

    Options:
      --flavors LIST    normal (128), large (256), x-large (512), xx-large
                        (1024), comma-separated. Default: normal,large.
                        What desktops ask for: Thunar normal or large by zoom
                        level, and xx-large for its preview pane; Nautilus
                        large, and x-large at display scale 2; Dolphin the
                        flavor nearest its zoom level.
      --cache-dir DIR   The cache. Default: $XDG_CACHE_HOME/thumbnails, or
                        ~/.cache/thumbnails.
      --jobs N          Files at a time. Default: the number of cores.
      --max-pixels N    Refuse sources with more pixels. Default 100000000.
      --max-source-bytes SIZE
                        Refuse larger files (1GiB, 500MB, bytes).
                        Default 256MiB.
      -0, --null        The list read from '-' is NUL-separated.
      -v, --verbose     Say what each file became.
      -q, --quiet       No progress line and no summary.
      -h, --help        Show this help.

    Failures print PATH: KIND: message. Exit status: 0 all succeeded (or were
    cached), 1 some failed, 2 usage error.
    """

  private struct Options: BatchOptions {
    var inputs: [String] = []
    var flavors: Set<FreedesktopCache.Flavor> = [.normal, .large]
    var cacheDirectory: String?
    var jobs = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    var limits = DecodingLimits()
    var maxSourceBytes = 256 << 20
    var nulSeparated = false
    var verbose = false
    var quiet = false
  }

  /// Runs the command and returns its exit status.
  static func run(_ arguments: [String]) -> Int32 {
    let options: Options
    let paths: [String]
    do throws(ThumbnailCommand.UsageError) {
      guard let parsed = try parse(arguments) else {
        print(usage)
        return 0
      }
      options = parsed
      paths = try InputList.expandingLists(options.inputs, nulSeparated: options.nulSeparated)
    } catch {
      printError("thumbd desktop: \(error.message)\nRun 'thumbd desktop --help' for usage.")
      return 2
    }
    let directory =
      options.cacheDirectory.map(SystemFiles.absolutePath)
      ?? FreedesktopCache.defaultDirectory(environment: SystemFiles.environment)
    guard let directory else {
      printError("thumbd desktop: no cache folder: set HOME or XDG_CACHE_HOME, or --cache-dir")
      return 2
    }
    let cache = FreedesktopCache(directory: directory, software: "thumbd \(Usage.version)")
    // Videos' frames come from the sandboxed worker, set up when the first video comes; the
    // installed thumbnailers make them when it cannot run here.
    var thumbnailer = Thumbnailer(limits: options.limits)
    thumbnailer.frames = LazyVideoFrames(
      environment: SystemFiles.environment, deadline: .seconds(options.limits.decodeTimeout))
    let maker = DesktopThumbnailer(
      cache: cache, thumbnailer: thumbnailer, maxSourceBytes: options.maxSourceBytes)
    // The types thumbd does not decode go to the installed thumbnailers, in a sandbox: set
    // up when the first such file comes.
    let installed = LazyDelegation(environment: SystemFiles.environment)
    let inputs = InputList(paths, excluding: InputList.Identity(directory))
    let report = options.report("thumbd desktop", jobs: inputs.files.count, inputs: inputs)
    let next = Atomic<Int>(0)
    let files = inputs.files
    let flavors = options.flavors
    WorkerThreads.run(count: max(1, min(options.jobs, files.count))) {
      while true {
        let index = next.add(1, ordering: .relaxed).oldValue
        guard index < files.count else { return }
        let file = files[index]
        let path = SystemFiles.absolutePath(file.path)
        var outcome = maker.thumbnail(path: path, flavors: flavors)
        if case .refused(let kind, _) = outcome, kind == "unsupported_format",
          let delegated = installed.thumbnail(path: path, flavors: flavors, maker: maker)
        {
          outcome = delegated
        }
        switch outcome {
        case .made(let entries):
          report.made(file.path, entries.values.sorted().joined(separator: ", "))
        case .cached: report.skipped(file.path, .cached)
        case .failedBefore: report.skipped(file.path, .failedBefore)
        case .refused(let kind, _) where kind == "unsupported_format" && file.walked:
          report.skipped(file.path, .notImage)
        case .refused(let kind, let message): report.failed(file.path, kind: kind, message: message)
        case .failed(let error): report.failed(file.path, kind: error.kind, message: error.message)
        }
      }
    }
    report.finish(quiet: options.quiet)
    return report.anyFailed ? 1 : 0
  }

  /// Returns nil when help was asked for.
  private static func parse(_ arguments: [String]) throws(ThumbnailCommand.UsageError) -> Options? {
    var options = Options()
    var cursor = ArgumentCursor(arguments)
    while let argument = cursor.next() {
      switch argument.name {
      case "-h", "--help":
        return nil
      case "--flavors", "--flavor":
        var flavors: Set<FreedesktopCache.Flavor> = []
        for name in try cursor.value(for: argument).split(separator: ",") {
          guard let flavor = FreedesktopCache.Flavor(rawValue: String(name)) else {
            throw .init(
              message: "--flavors takes normal, large, x-large and xx-large, not '\(name)'")
          }
          flavors.insert(flavor)
        }
        guard !flavors.isEmpty else { throw .init(message: "--flavors names no flavor") }
        options.flavors = flavors
      case "--cache-dir":
        options.cacheDirectory = try cursor.value(for: argument)
      case "--max-pixels":
        options.limits.maxPixels = try cursor.integer(for: argument, in: 1...Int.max)
      case "--max-source-bytes":
        let value = try cursor.value(for: argument)
        guard let bytes = ByteSize.parse(value), bytes > 0 else {
          throw .init(
            message: "--max-source-bytes expects a size (256MiB, 1GB, bytes), got '\(value)'")
        }
        options.maxSourceBytes = bytes
      default:
        guard try options.takeShared(argument, &cursor) else {
          throw .init(message: "unknown option '\(argument.name)'")
        }
      }
    }
    options.inputs += cursor.operands
    guard !options.inputs.isEmpty else { throw .init(message: "no INPUT given") }
    return options
  }
}

/// The installed thumbnailers for `thumbd desktop`, found and probed once, when the first file
/// of a type thumbd does not decode comes (a run of photos never starts bubblewrap).
private final class LazyDelegation: Sendable {
  private let environment: [String: String]
  private let state = Mutex<(globs: MediaTypeGlobs, delegation: DesktopDelegation?)?>(nil)

  init(environment: [String: String]) { self.environment = environment }

  /// The outcome of the file at `path` by the entry for its type (from its name), or nil
  /// when there is none or no sandbox works here (said once, on standard error).
  func thumbnail(
    path: String, flavors: Set<FreedesktopCache.Flavor>, maker: DesktopThumbnailer
  ) -> DesktopThumbnailer.Outcome? {
    let (globs, delegation) = state.withLock { state in
      if let state { return state }
      let globs = MediaTypeGlobs.load(environment: environment)
      var delegation: DesktopDelegation?
      // Only files the maker refused come here (fallbackWaiting): which types are native
      // does not matter.
      switch DesktopDelegation.installed(
        environment: environment, native: DesktopThumbnailer.mediaTypes(frames: true))
      {
      case .success(let found): delegation = found
      case .failure(let reason):
        printError("thumbd desktop: installed thumbnailers are not used: \(reason.text)")
      }
      state = (globs, delegation)
      return (globs, delegation)
    }
    guard let delegation, let name = path.split(separator: "/").last,
      let type = globs.type(ofName: String(name))
    else { return nil }
    return delegation.fallbackWaiting(path: path, flavors: flavors, mediaType: type, maker: maker)
  }
}
