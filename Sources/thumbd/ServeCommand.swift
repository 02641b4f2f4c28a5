import CNetShim
import Dispatch
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
    let options = ConfigOption.all.map { option in
      let flag = option.isSwitch ? option.flag : "\(option.flag) VALUE"
      return "  " + flag.padded(to: 30) + option.expects
    }
    return """
      thumbd serve: serve thumbnails over a Unix socket (and optionally TCP).

      Usage:
        thumbd serve [--config FILE] [--socket PATH] [--listen 127.0.0.1:PORT] [options]

      Endpoints: GET /v1/thumbnail?url=&w=&h=&scale=&fit=&format=&quality=,
      GET /v1/session (upgrade to the session protocol), GET /healthz, GET /metrics.
      SIGTERM or SIGINT stops accepting and drains; SIGHUP reopens the log file.
      Under systemd socket activation (LISTEN_FDS) the passed sockets are used.

      Options (each is also a config key and a THUMBD_... variable):
        --config FILE                 JSON config file (also THUMBD_CONFIG)

      """ + options.joined(separator: "\n")
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
      return 1
    }
    do {
      return try await serve(config, logger: logger, environment: environment)
    } catch {
      logger.log(.error, "startup_failed", ["reason": "\(error)"])
      return 1
    }
  }

  private static func serve(
    _ config: DaemonConfig, logger: Logger, environment: [String: String]
  ) async throws -> Int32 {
    raiseDescriptorLimit(toServe: config.maxConnections, logger: logger)
    let loader = try sourceLoader(config)
    let storage = StorageHealth(logger: logger)
    let pipeline = ThumbnailPipeline(
      configuration: try pipelineConfiguration(config, loader, storage))
    let parameters = ThumbnailParameters(
      defaultFormat: OutputFormat(rawValue: config.defaultFormat) ?? .auto,
      defaultQuality: config.defaultQuality)
    let route = ThumbnailRoute(
      pipeline: pipeline, maxAge: config.cacheMaxAge, parameters: parameters)
    let server = try HTTPServer(
      router: Router(
        thumbnails: route, fetcher: loader, storage: storage,
        extra: [SessionConfiguration.refusalRoute]),
      sessions: SessionConfiguration(parameters: parameters), logger: logger,
      serverLimits: ServerLimits(
        maxConnections: config.maxConnections, headerTimeout: config.headerTimeout,
        idleTimeout: config.idleTimeout, sessionMemory: config.sessionMemory))
    var ownedSocket: String?
    var endpoints: [String] = []
    if let inherited = try SocketActivation.listeners(environment: environment) {
      for fd in inherited { try server.listen(on: fd) }
      endpoints.append("\(inherited.count) socket(s) from systemd")
    } else {
      let fd = ns_listen_unix(config.socket, config.socketMode, 1024)
      guard fd >= 0 else { throw ServerError.system("listen on \(config.socket)", -fd) }
      try server.listen(on: fd)
      ownedSocket = config.socket
      endpoints.append(config.socket)
    }
    if let address = ListenAddress(config.listen) {
      if !address.host.hasPrefix("127.") {
        // The TCP listener has no authentication: anyone who reaches it is a client.
        logger.log(
          .warn, "listen_unauthenticated",
          ["address": config.listen, "advice": "keep TCP on loopback or behind a proxy"])
      }
      let fd = ns_listen_tcp(address.host, address.port, 1024)
      guard fd >= 0 else { throw ServerError.system("listen on \(config.listen)", -fd) }
      try server.listen(on: fd)
      endpoints.append("\(address.host):\(ns_local_port(fd))")
    }
    let drainTimeout = config.drainTimeout
    var signals = [SIGTERM, SIGINT].map { number in
      onSignal(number) {
        logger.log(.info, "draining", ["signal": number == SIGTERM ? "TERM" : "INT"])
        server.stop(drainTimeout: drainTimeout)
      }
    }
    signals.append(
      onSignal(SIGHUP) {
        do {
          try logger.reopen()
          logger.log(.info, "log_reopened")
        } catch {
          printError("thumbd: cannot reopen the log file: \(error)")
        }
      })
    server.start()
    logger.log(
      .info, "listening",
      [
        "endpoints": endpoints.joined(separator: ","),
        "cache_dir": config.cacheDir.isEmpty ? "none" : config.cacheDir,
        "version": Usage.version,
      ])
    await withCheckedContinuation { continuation in
      SystemThread.detach(name: "thumbd-wait") {
        server.wait()
        continuation.resume()
      }
    }
    if let ownedSocket { unlink(ownedSocket) }
    // Thumbnails are written to disk after they are delivered: let the last ones land, within
    // the drain time, so a restart finds them.
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await pipeline.flushDiskWrites() }
      group.addTask { try? await Task.sleep(for: .seconds(min(drainTimeout, 3600))) }
      await group.next()
      group.cancelAll()
    }
    withExtendedLifetime(signals) {}
    logger.log(.info, "stopped", ["abandoned": String(server.abandonedAtExit)])
    return 0
  }

  private static func sourceLoader(_ config: DaemonConfig) throws -> SourceLoader {
    let policy = SourcePolicy(
      allowedSchemes: Set(config.allowedSchemes),
      allowedHosts: config.allowedHosts.isEmpty ? nil : Set(config.allowedHosts),
      allowPrivateAddresses: config.allowPrivate,
      allowedNetworks: config.allowedNetworks.compactMap(IPNetwork.init),
      fileRoots: config.fileRoots)
    let limits = FetchLimits(
      maxSourceBytes: config.maxSourceBytes, connectTimeout: config.connectTimeout,
      totalTimeout: config.requestTimeout, maxRedirects: config.maxRedirects,
      retries: config.fetchRetries)
    // Made at start, so a missing libcurl stops start-up instead of failing every fetch.
    var transport: (any HTTPTransport)?
    if !policy.allowedSchemes.isDisjoint(with: ["http", "https"]) {
      transport = try CurlTransport(
        options: .init(
          connectionsPerHost: config.originConnections,
          caFile: config.caFile.isEmpty ? nil : config.caFile,
          caPath: config.caPath.isEmpty ? nil : config.caPath,
          userAgent: "thumbd/\(Usage.version)"))
    }
    return SourceLoader(
      policy: policy, limits: limits, transport: transport,
      resolver: SystemResolver(cacheSeconds: config.dnsCacheSeconds))
  }

  private static func pipelineConfiguration(
    _ config: DaemonConfig, _ loader: SourceLoader, _ storage: StorageHealth
  ) throws -> ThumbnailPipeline.Configuration {
    let decodingLimits = DecodingLimits(
      maxWidth: config.maxDimension, maxHeight: config.maxDimension, maxPixels: config.maxPixels,
      decodeTimeout: config.decodeTimeout)
    let disk =
      try config.cacheDir.isEmpty
      ? nil
      : DiskCache(
        directory: config.cacheDir, sizeLimit: config.diskLimit, onFault: storage.record)
    return ThumbnailPipeline.Configuration(
      dataLoader: loader,
      thumbnailer: Thumbnailer(limits: decodingLimits),
      memoryCacheCostLimit: config.memoryLimit, memoryCacheCountLimit: config.memoryCountLimit,
      maxConcurrentFetches: config.fetchConcurrency, maxFetchesPerOrigin: config.originConnections,
      decodeThreads: config.decodeThreads == 0 ? ThumbnailPipeline.coreCount : config.decodeThreads,
      maxQueuedDecodes: config.maxQueuedDecodes,
      maxPrefetchInProgress: config.prefetchConcurrency, diskCache: disk,
      negativeCacheSeconds: config.negativeCacheSeconds)
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

  private static func onSignal(
    _ number: Int32, _ handler: @escaping @Sendable () -> Void
  ) -> any DispatchSourceSignal {
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number)
    source.setEventHandler(handler: handler)
    source.resume()
    return source
  }
}
