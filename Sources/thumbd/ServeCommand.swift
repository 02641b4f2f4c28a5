import CSystem
import ImagePipeline
import ThumbServer
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// `thumbd serve`: the daemon. Settings come from the embedded defaults, `--config FILE`,
/// `THUMBD_...` variables and flags, in rising precedence (docs/CONFIG.md).
enum ServeCommand {
  static var usage: String {
    // Each option: its flag and what it takes, then its meaning and default from the table
    // docs/CONFIG.md shows (ConfigOption.documentation), wrapped, without Markdown.
    let options = ConfigOption.all.map { option in
      let flag = option.isSwitch ? option.flag : "\(option.flag) VALUE"
      let plain = { (text: String) in text.replacing("`", with: "") }
      let text =
        plain(option.meaning) + " (default: " + plain(option.defaultValue) + "; "
        + (option.isSwitch ? "a switch" : option.expects) + ")"
      return "  " + flag + "\n" + wrapped(text, indent: 6, width: 96)
    }
    return """
      thumbd serve: serve thumbnails over a Unix socket (and optionally TCP).

      Usage:
        thumbd serve [--config FILE] [--socket PATH] [--listen 127.0.0.1:PORT] [options]

      Endpoints: GET /v1/thumbnail?url=&w=&h=&scale=&fit=&format=&quality=,
      GET /v1/session (upgrade to the session protocol), GET /healthz, GET /metrics.
      SIGTERM or SIGINT stops accepting and drains; SIGHUP reopens the log file and reads
      the installed thumbnailer entries again.
      Under systemd socket activation (LISTEN_FDS) the passed sockets are used.

      Options (each is also a config key and a THUMBD_... variable):
        --config FILE                 JSON config file (also THUMBD_CONFIG)

      """ + options.joined(separator: "\n")
  }

  /// `text` in lines of at most `width` columns, each indented by `indent` spaces.
  static func wrapped(_ text: String, indent: Int, width: Int) -> String {
    var lines: [String] = []
    var line = ""
    for word in text.split(separator: " ") {
      if !line.isEmpty && indent + line.count + 1 + word.count > width {
        lines.append(line)
        line = ""
      }
      line += (line.isEmpty ? "" : " ") + word
    }
    if !line.isEmpty { lines.append(line) }
    let margin = String(repeating: " ", count: indent)
    return lines.map { margin + $0 }.joined(separator: "\n")
  }

  static func run(_ arguments: [String]) async -> Int32 {
    let environment = SystemFiles.environment
    let config: DaemonConfig
    do {
      switch try ConfigLoader.load(arguments: arguments, environment: environment) {
      case .help:
        print(usage)
        return 0
      case .serve(let loaded, _): config = loaded
      }
    } catch {
      printError("thumbd serve: \(error)\nRun 'thumbd serve --help' for the options.")
      return 2
    }
    let logger: Logger
    do {
      logger = try Logger(
        level: config.logLevel, format: config.logFormat,
        path: config.logFile.isEmpty ? nil : config.logFile)
    } catch {
      printError("thumbd serve: \(error)")
      return 2
    }
    // Whatever stops start-up (a socket that cannot be bound, a cache that cannot be made, a
    // root that cannot be opened) exits 2, as an invalid setting does (docs/CONFIG.md): the
    // configuration must change before a restart can help.
    do {
      return try await serve(config, logger: logger, environment: environment)
    } catch {
      logger.log(.error, "startup_failed", ["reason": "\(error)"])
      return 2
    }
  }

  private static func serve(
    _ config: DaemonConfig, logger: Logger, environment: [String: String]
  ) async throws -> Int32 {
    raiseDescriptorLimit(toServe: config.maxConnections, logger: logger)
    // Before the daemon's threads allocate: see docs/ARCHITECTURE.md, "Memory".
    ts_malloc_tune(Int32(config.mallocArenas), config.mallocMmapThreshold)
    let daemon = try Daemon(
      config: config, logger: logger, version: Usage.version, ownsProcess: true)
    var ownedSocket: String?
    var endpoints: [String] = []
    if let inherited = try SocketActivation.listeners(environment: environment) {
      for fd in inherited { try daemon.server.listen(on: fd) }
      endpoints = ["\(inherited.count) socket(s) from systemd"] + (try daemon.listenOnTCP())
    } else {
      endpoints = try daemon.listenOnConfiguredEndpoints()
      ownedSocket = config.socket
    }
    let drainTimeout = config.drainTimeout
    SignalWaiter.start { number in
      if number == SIGHUP {
        do {
          try logger.reopen()
          logger.log(.info, "log_reopened")
        } catch {
          printError("thumbd: cannot reopen the log file: \(error)")
        }
        daemon.reload()
      } else {
        logger.log(.info, "draining", ["signal": number == SIGTERM ? "TERM" : "INT"])
        daemon.stop(drainTimeout: drainTimeout)
      }
    }
    // Logged before the loop starts: the sockets already listen (connections wait in the
    // backlog), and whoever sees the first answer (/healthz) can rely on the line being there.
    logger.log(
      .info, "listening",
      [
        "endpoints": endpoints.joined(separator: ","),
        "cache_dir": config.cacheDir.isEmpty ? "none" : config.cacheDir,
        "file_roots": config.fileRoots.isEmpty ? "none" : daemon.fileRootsDescription,
        "dbus": daemon.desktop?.uniqueName ?? "none",
        "version": Usage.version,
      ])
    daemon.start()
    await SystemThread.run(name: "thumbd-wait") { daemon.server.wait() }
    if let ownedSocket { unlink(ownedSocket) }
    // Thumbnails are written to disk after they are delivered: let the last ones land.
    await daemon.flushDiskWrites()
    logger.log(.info, "stopped", ["abandoned": String(daemon.server.abandonedAtExit)])
    return 0
  }

  /// Each connection is a descriptor: lift the soft limit (often 1024) to the hard one, so
  /// `max_connections` is not cut short by a default meant for interactive shells.
  private static func raiseDescriptorLimit(toServe connections: Int, logger: Logger) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    if limit.rlim_cur < limit.rlim_max {
      limit.rlim_cur = limit.rlim_max
      _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
    // Room for the listeners, caches, origin connections and logs besides clients.
    if Int(limit.rlim_cur) < connections + 256 {
      logger.log(
        .warn, "descriptor_limit",
        ["limit": String(limit.rlim_cur), "max_connections": String(connections)])
    }
  }
}
