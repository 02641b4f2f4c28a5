import CSystem
import ImagePipeline
import Synchronization
import ThumbClient
import ThumbServer
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// `thumbd warm`: thumbnails local files into the daemon's disk cache, so the requests
/// browsers and apps will make are `X-Thumbd-Cache: disk` (or memory) hits from the first.
///
/// Every thumbnail is asked of a daemon over HTTP, as a browser asks: `format=auto` with the
/// `Accept` of a client that takes JPEG only, WebP, or AVIF, so negotiation, URL
/// normalisation and cache keys are the daemon's own. When a daemon holds the cache (its
/// lock), warm talks to it over its socket; otherwise warm starts the same daemon in-process,
/// on a private socket, with the same configuration (`--config`, `THUMBD_...`, the serve
/// flags), and drains it before exiting.
enum WarmCommand {
  static let usage = """
    thumbd warm: fill the daemon's disk cache with thumbnails of local files.

    Usage:
      thumbd warm INPUT... --size WxH [--scale N] [--fit MODE] [--quality Q]
                  [--colour MODE] [--formats LIST | --format FMT] [--jobs N]
                  [-0] [-v] [-q] [serve options: --cache-dir, --socket, --disk-limit,
                  --file-root, --config, ...]

    INPUTs are files and directories (walked as 'thumbd thumbnail' walks them)
    or '-' (a list on standard input, -0 for NUL-separated). Each file is asked
    for as file://<absolute path, percent-encoded>, the URL a client would send.

    --formats LIST    Which of format=auto's answers to fill, comma-separated:
                      jpeg (JPEG, or PNG for transparency: clients that accept
                      neither WebP nor AVIF), webp, avif (only when auto_avif is
                      on). Default: jpeg,webp, and avif when auto_avif is on.
    --format FMT      Fill format=FMT (png, jpeg, webp, avif) instead.
    --jobs N          Requests at a time. Default: the number of cores.
    -v, --verbose     Say what each request gave (made or already cached).
    -q, --quiet       No progress line and no summary.

    Every other option is a 'thumbd serve' option (see 'thumbd serve --help'),
    read with the config file and THUMBD_ variables as serve reads them. When a
    running daemon holds --cache-dir, warm asks it over --socket (at prefetch
    priority, so the daemon's own clients go first); otherwise warm runs the
    daemon itself on the cache and stops it when done. Without file_roots, the
    INPUTs (and the folders of named files) are the roots.
    Failures print PATH: KIND: message. Exit status: 0 all succeeded, 1 some
    failed, 2 usage or configuration error.
    """

  /// One answer of format negotiation to fill.
  struct Variant: Sendable {
    let name: String
    let format: String
    let accept: String?
  }

  private struct Options: BatchOptions {
    var inputs: [String] = []
    var spec = ThumbnailSpec(width: 0, height: 0)
    var given: Set<String> = []
    var formats: [String]?
    var jobs = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    var nulSeparated = false
    var verbose = false
    var quiet = false
    var serveArguments: [String] = []
  }

  /// Runs the command and returns its exit status.
  static func run(_ arguments: [String]) async -> Int32 {
    var options: Options
    let config: DaemonConfig
    let variants: [Variant]
    let inputs: InputList
    do throws(ThumbnailCommand.UsageError) {
      guard let parsed = try parse(arguments) else {
        print(usage)
        return 0
      }
      options = parsed
      let loaded: ConfigLoader.Outcome
      do {
        loaded = try ConfigLoader.load(
          arguments: options.serveArguments, environment: SystemFiles.environment)
      } catch {
        throw .init(message: "\(error)")
      }
      guard case .serve(let read, _) = loaded else {
        print(usage)
        return 0
      }
      config = read
      guard !config.cacheDir.isEmpty else {
        throw .init(message: "there is no cache to warm: cache_dir is empty")
      }
      variants = try self.variants(options, config: config)
      let listed = try InputList.expandingLists(
        options.inputs, nulSeparated: options.nulSeparated)
      inputs = InputList(listed, excluding: InputList.Identity(config.cacheDir))
      guard !inputs.files.isEmpty else { throw .init(message: "the inputs hold no files") }
    } catch {
      printError("thumbd warm: \(error.message)\nRun 'thumbd warm --help' for usage.")
      return 2
    }
    let running = cacheIsHeld(config.cacheDir)
    var ownDaemon: Daemon?
    var endpoint = config.socket
    if !running {
      do {
        (ownDaemon, endpoint) = try startDaemon(config, roots: inputs)
      } catch {
        printError("thumbd warm: cannot start the daemon on \(config.cacheDir): \(error)")
        return 1
      }
    }
    let socket = endpoint
    let urls = inputs.files.map { file in
      "file://" + PercentEncoding.encode(SystemFiles.absolutePath(file.path), keeping: "/")
    }
    let report = options.report(
      "thumbd warm", jobs: urls.count * variants.count, inputs: inputs)
    let query = self.query(options)
    let priority = running ? "prefetch" : "visible"
    let next = Atomic<Int>(0)
    let total = urls.count * variants.count
    let work: @Sendable () -> Void = {
      var connection: Int32 = -1
      while true {
        let index = next.add(1, ordering: .relaxed).oldValue
        guard index < total else { break }
        let (fileIndex, variant) = (index / variants.count, variants[index % variants.count])
        let target =
          "/v1/thumbnail?url=\(PercentEncoding.encode(urls[fileIndex]))\(query)"
          + "&format=\(variant.format)&priority=\(priority)"
        let path = inputs.files[fileIndex].path
        ask(socket, target, variant, &connection, path: path, report: report)
      }
      if connection >= 0 { close(connection) }
    }
    WorkerThreads.run(count: max(1, min(options.jobs, total)), work)
    if let ownDaemon {
      ownDaemon.stop(drainTimeout: config.drainTimeout)
      ownDaemon.server.wait()
      await ownDaemon.flushDiskWrites()
      unlink(socket)
      rmdir(SystemFiles.parent(of: socket))
    }
    report.finish(quiet: options.quiet)
    return report.anyFailed ? 1 : 0
  }

  /// One request, retried while the daemon says 503 (busy) and on a connection it closed.
  private static func ask(
    _ socket: String, _ target: String, _ variant: Variant, _ connection: inout Int32,
    path: String, report: RunReport
  ) {
    var headers = [("X-Thumbd-Client", "thumbd-warm")]
    if let accept = variant.accept { headers.append(("Accept", accept)) }
    for attempt in 0..<30 {
      if connection < 0 { connection = ts_connect_unix(socket) }
      guard connection >= 0 else {
        report.failed(
          path, kind: "io",
          message: "cannot connect to the daemon at \(socket): \(SystemFiles.describe(-connection))"
        )
        connection = -1
        return
      }
      switch HTTPRoundTrip.get(fd: connection, target: target, headers: headers) {
      case .reply(let reply):
        if !reply.keepAlive {
          close(connection)
          connection = -1
        }
        if reply.status == 503 && attempt < 29 {
          let wait = min(max(Double(reply.headers["retry-after"] ?? "") ?? 0.2, 0.05), 5)
          usleep(UInt32(wait * 1_000_000))
          continue
        }
        record(reply, variant, path: path, report: report)
        return
      case .closedBeforeReply, .failed:
        close(connection)
        connection = -1
        if attempt >= 2 {
          report.failed(path, kind: "io", message: "the daemon closed the connection")
          return
        }
      }
    }
  }

  private static func record(
    _ reply: HTTPRoundTrip.Reply, _ variant: Variant, path: String, report: RunReport
  ) {
    let cache = reply.headers["x-thumbd-cache"] ?? ""
    if reply.status == 200 {
      let format = reply.headers["content-type"].map { String($0.dropFirst("image/".count)) }
      if cache == "memory" || cache == "disk" {
        report.skipped(path + " (\(variant.name))", .cached)
      } else {
        report.made(path + " (\(variant.name))", format.map { "\(cache), \($0)" })
      }
      return
    }
    var kind = "http_\(reply.status)"
    var message = String(decoding: reply.body.prefix(200), as: UTF8.self)
    if case .object(let fields)? = JSONValue.parse(reply.body) {
      if case .string(let value)? = fields["error"] { kind = value }
      if case .string(let value)? = fields["message"] { message = value }
    }
    report.failed(path, kind: kind, message: message)
  }

  /// The query besides url, format and priority: what the user set, nothing else (the
  /// daemon's defaults fill the rest, as they do for clients).
  private static func query(_ options: Options) -> String {
    let spec = options.spec
    var query = "&w=\(spec.width)&h=\(spec.height)"
    if options.given.contains("--scale") { query += "&scale=\(spec.scale)" }
    if options.given.contains("--fit") { query += "&fit=\(spec.fit.rawValue)" }
    if options.given.contains("--quality") { query += "&quality=\(spec.quality)" }
    if options.given.contains("--colour") { query += "&colour=\(spec.colour.rawValue)" }
    return query
  }

  private static func variants(
    _ options: Options, config: DaemonConfig
  ) throws(ThumbnailCommand.UsageError) -> [Variant] {
    if options.given.contains("--format") && options.spec.format != .auto {
      guard options.formats == nil else {
        throw .init(message: "--format \(options.spec.format.rawValue) and --formats disagree")
      }
      return [
        Variant(
          name: options.spec.format.rawValue, format: options.spec.format.rawValue, accept: nil)
      ]
    }
    let names = options.formats ?? (["jpeg", "webp"] + (config.autoAVIF ? ["avif"] : []))
    var variants: [Variant] = []
    for name in names {
      switch name {
      case "jpeg", "png":
        variants.append(
          .init(name: "jpeg", format: "auto", accept: "image/jpeg,image/png,*/*;q=0.8"))
      case "webp":
        variants.append(.init(name: "webp", format: "auto", accept: "image/webp,*/*;q=0.8"))
      case "avif":
        guard config.autoAVIF else {
          throw .init(
            message: "--formats avif: format=auto never answers AVIF while auto_avif is off")
        }
        variants.append(
          .init(name: "avif", format: "auto", accept: "image/avif,image/webp,*/*;q=0.8"))
      default:
        throw .init(message: "--formats takes jpeg, webp and avif, got '\(name)'")
      }
    }
    var seen: Set<String> = []
    return variants.filter { seen.insert($0.name).inserted }
  }

  /// Whether a process holds the cache directory's lock (a running daemon).
  private static func cacheIsHeld(_ directory: String) -> Bool {
    let fd = open(directory + "/lock", O_RDWR | O_CLOEXEC | O_NOFOLLOW)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
    flock(fd, LOCK_UN)
    return false
  }

  /// The daemon of `config`, on a private socket of its own, serving the inputs' folders when
  /// no roots are configured.
  private static func startDaemon(
    _ config: DaemonConfig, roots inputs: InputList
  ) throws -> (Daemon, String) {
    var template = Array("/tmp/thumbd-warm-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else {
      throw StartupError(message: "cannot make a private directory: \(SystemFiles.describe(errno))")
    }
    var own = config
    own.socket = String(cString: made) + "/warm.sock"
    own.socketMode = 0o600
    own.listen = ""
    if own.fileRoots.isEmpty { own.fileRoots = inputs.roots }
    let logger = try Logger(level: .warn, format: own.logFormat, path: nil)
    let daemon = try Daemon(config: own, logger: logger, version: Usage.version)
    _ = try daemon.listenOnConfiguredEndpoints()
    daemon.start()
    return (daemon, own.socket)
  }

  /// Returns nil when help was asked for.
  private static func parse(
    _ arguments: [String]
  ) throws(ThumbnailCommand.UsageError) -> Options? {
    var options = Options()
    var cursor = ArgumentCursor(arguments)
    while let argument = cursor.next() {
      if try SpecOptions.parse(argument, &cursor, into: &options.spec) {
        // The daemon is asked through the query form, which names geometry by parameter.
        guard argument.name != "--options" else {
          throw .init(message: "warm does not take --options; give thumbnail's or a preset")
        }
        options.given.insert(argument.name)
        continue
      }
      switch argument.name {
      case "-h", "--help":
        return nil
      case "--formats":
        options.formats = try cursor.value(for: argument).split(separator: ",").map {
          String($0.trimmingWhitespace()).lowercased()
        }
      default:
        if try options.takeShared(argument, &cursor) { continue }
        // A serve option: passed on whole, with its value when it takes one.
        if let inline = argument.inlineValue {
          options.serveArguments.append(argument.name + "=" + inline)
        } else {
          options.serveArguments.append(argument.name)
          let isSwitch = ConfigOption.all.first { $0.flag == argument.name }?.isSwitch ?? false
          if !isSwitch, argument.name != "-h", let value = cursor.rawNext() {
            options.serveArguments.append(value)
          }
        }
      }
    }
    options.inputs += cursor.operands
    guard !options.inputs.isEmpty else { throw .init(message: "no INPUT given") }
    guard options.given.contains("--size") else { throw .init(message: "--size is required") }
    do {
      try options.spec.validate()
    } catch {
      throw .init(message: error.message)
    }
    return options
  }
}
