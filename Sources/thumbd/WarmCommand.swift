import ImagePipeline
import ThumbSystem

/// `thumbd warm`: thumbnails local files into a disk cache, so a daemon started on the same
/// cache directory answers them from disk (`X-Thumbd-Cache: disk`) from its first request.
enum WarmCommand {
  static let usage = """
    thumbd warm: fill a disk cache with thumbnails of local files.

    Usage:
      thumbd warm FILE... --cache-dir DIR --size WxH [--disk-limit BYTES] [--scale N]
                  [--fit MODE] [--format FMT] [--quality Q] [--upscale] [--colour MODE]

    Each FILE is loaded as file://<absolute path>, the key the daemon uses for
    that URL. Entries are written atomically; a warm run killed at any moment
    leaves only whole entries behind. --disk-limit defaults to 1 GiB.
    Failed files print PATH: KIND: message on stderr. Exit status: 0 all
    succeeded, 1 some file failed, 2 usage error.
    """

  /// Runs the command and returns its exit status.
  static func run(_ arguments: [String]) async -> Int32 {
    var spec = ThumbnailSpec(width: 0, height: 0)
    var files: [String] = []
    var cacheDirectory: String?
    var diskLimit = 1 << 30
    var cursor = ArgumentCursor(arguments)
    do throws(ThumbnailCommand.UsageError) {
      while let argument = cursor.next() {
        if try SpecOptions.parse(argument, &cursor, into: &spec) { continue }
        switch argument.name {
        case "-h", "--help":
          print(usage)
          return 0
        case "--cache-dir": cacheDirectory = try cursor.value(for: argument)
        case "--disk-limit": diskLimit = try cursor.integer(for: argument, in: 1...Int.max)
        default:
          if argument.name.hasPrefix("-") {
            throw ThumbnailCommand.UsageError(message: "unknown option '\(argument.name)'")
          }
          files.append(argument.name)
        }
      }
      guard !files.isEmpty else { throw ThumbnailCommand.UsageError(message: "no FILE given") }
      guard cacheDirectory != nil else {
        throw ThumbnailCommand.UsageError(message: "--cache-dir is required")
      }
      do {
        try spec.validate()
      } catch {
        throw ThumbnailCommand.UsageError(message: error.message)
      }
    } catch {
      printError("thumbd warm: \(error.message)\nRun 'thumbd warm --help' for usage.")
      return 2
    }
    let paths = files.map(SystemFiles.absolutePath)
    let roots = Array(Set(paths.map(SystemFiles.parent(of:))))
    let cache: DiskCache
    do {
      cache = try DiskCache(directory: cacheDirectory!, sizeLimit: diskLimit)
    } catch {
      printError("thumbd warm: cannot open the cache directory: \(error)")
      return 2
    }
    let loader = SourceLoader(policy: SourcePolicy(allowedSchemes: ["file"], fileRoots: roots))
    let pipeline = ThumbnailPipeline(
      configuration: .init(dataLoader: loader, memoryCacheCostLimit: 0, diskCache: cache))
    var failures = 0
    for (file, path) in zip(files, paths) {
      do {
        _ = try await pipeline.response(for: ImageRequest(url: "file://" + path, spec: spec))
      } catch let error as PipelineError {
        printError("\(file): \(error.kind): \(error.message)")
        failures += 1
      } catch {
        printError("\(file): error: \(error)")
        failures += 1
      }
    }
    return failures == 0 ? 0 : 1
  }
}
