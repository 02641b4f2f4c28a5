import CSystem
import ImagePipeline
import Sandbox
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon composed from its configuration: the source loader and its policy, the
/// pipeline and its caches, the routes, the session upgrader and the server. `thumbd serve`
/// adds signals, socket activation and logging around it; tests start one in-process.
public final class Daemon: Sendable {
  /// The pipeline every route and session uses.
  public let pipeline: ThumbnailPipeline
  /// The event loop and its listeners.
  public let server: HTTPServer
  /// The settings it was built from.
  public let config: DaemonConfig
  /// The desktop's thumbnail services on D-Bus, when `dbus` names a bus.
  package let desktop: DesktopBus?
  /// The installed thumbnailers the desktop's services run, when a sandbox works here.
  package let delegation: DesktopDelegation?
  /// Reads the entries again when their folders change.
  private let entryWatch: FolderWatch?
  private let logger: Logger

  /// Builds everything `config` describes; nothing listens yet. `version` names the daemon
  /// to origins (`User-Agent: thumbd/VERSION`). Throws when a part cannot be made (libcurl
  /// missing, a cache directory that cannot be opened). `ownsProcess` says the daemon has its
  /// process to itself (`thumbd serve`): its memory budget then counts the process's own
  /// memory beyond `memory_process_allowance`.
  public init(
    config: DaemonConfig, logger: Logger, version: String, ownsProcess: Bool = false
  ) throws {
    self.config = config
    self.logger = logger
    let loader = try Self.sourceLoader(config, version: version)
    let storage = StorageHealth(logger: logger)
    let frames = Self.videoFrames(config, logger: logger)
    var pipelineConfiguration = try Self.pipelineConfiguration(
      config, loader, storage, frames: frames)
    if ownsProcess {
      pipelineConfiguration.processMemory = .thisProcess(
        allowance: config.memoryProcessAllowance)
    }
    pipeline = ThumbnailPipeline(configuration: pipelineConfiguration)
    var parameters = ThumbnailParameters(
      defaultFormat: OutputFormat(rawValue: config.defaultFormat) ?? .auto,
      defaultQuality: config.defaultQuality, avifInAuto: config.autoAVIF,
      defaultColour: config.colour, presets: try Self.presets(config),
      clientHints: try Self.clientHints(config))
    parameters.watermarks = try Self.watermarks(config)
    parameters.maxAnimationFrames = config.maxAnimationFrames
    if !ColourManagement.useStandardCMYKProfile(
      contentsOf: config.cmykProfile.isEmpty ? nil : config.cmykProfile),
      !config.cmykProfile.isEmpty
    {
      logger.log(
        .warn, "cmyk_profile_unusable",
        ["path": config.cmykProfile, "fallback": "CMYK JPEGs without a profile use a formula"])
    }
    let delegation =
      config.dbus.isEmpty
      ? nil
      : Self.delegation(
        native: DesktopThumbnailer.mediaTypes(frames: frames != nil), logger: logger)
    self.delegation = delegation
    let desktop = try Self.desktopBus(
      config, pipeline, version: version, delegation: delegation, frames: frames)
    self.desktop = desktop
    entryWatch = delegation.flatMap { delegation in
      FolderWatch(folders: delegation.folders) {
        Self.reload(delegation, desktop, logger: logger, cause: "folder")
      }
    }
    let signing = try Self.signing(config)
    let refusesUnsigned = signing != nil && !config.allowUnsignedTCP
    let route = ThumbnailRoute(
      pipeline: pipeline, maxAge: config.cacheMaxAge, parameters: parameters,
      refusesUnsignedOverNetwork: refusesUnsigned,
      limiter: config.effectiveClientMissRate > 0
        ? ClientLimiter(
          rate: Double(config.effectiveClientMissRate), burst: config.clientMissBurst,
          trustedProxies: config.trustedProxies.compactMap(IPNetwork.init))
        : nil)
    let serverLimits = ServerLimits(
      maxConnections: config.maxConnections, headerTimeout: config.headerTimeout,
      idleTimeout: config.idleTimeout, sessionMemory: config.sessionMemory)
    let sessions = SessionUpgrader(
      pipeline: pipeline, parameters: parameters,
      refusesOverNetwork: refusesUnsigned || config.presetsOnly,
      memory: SessionMemory(limit: serverLimits.sessionMemory), logger: logger)
    let paths = SignedPathRoute(thumbnails: route, signing: signing, prefix: config.pathPrefix)
    let statuses = StatusCounts()
    // Every route the daemon answers, in one table.
    let routes = [
      route.route,
      HealthRoute(storage: storage).route,
      MetricsRoute(
        thumbnails: route, fetcher: loader, statuses: statuses, paths: paths,
        delegation: delegation, frames: frames
      ).route,
      sessions.refusalRoute,
      PurgeRoute(pipeline: pipeline, overNetwork: config.networkPurge).route,
      PlaceholderRoute(thumbnails: route).route,
    ]
    server = try HTTPServer(
      router: Router(routes: routes, paths: paths, statuses: statuses), upgraders: [sessions],
      logger: logger, serverLimits: serverLimits,
      loops: config.eventLoops == 0 ? ThumbnailPipeline.coreCount : config.eventLoops)
  }

  /// The file roots as configured, each with its real path where that differs, for the
  /// `listening` log line.
  public var fileRootsDescription: String {
    SourcePolicy.describe(fileRoots: config.fileRoots).joined(separator: ",")
  }

  /// Listens on the configured Unix socket (mode `socket_mode`) and, when `listen` is set,
  /// on TCP. Returns the endpoints, for the `listening` log line.
  public func listenOnConfiguredEndpoints() throws -> [String] {
    let fd = ts_listen_unix(config.socket, config.socketMode, 1024)
    guard fd >= 0 else { throw ServerError.system("listen on \(config.socket)", -fd) }
    try server.listen(on: fd)
    return [config.socket] + (try listenOnTCP())
  }

  /// Listens on TCP when `listen` is set (with a warning off loopback: the listener has no
  /// authentication); returns the bound endpoint.
  public func listenOnTCP() throws -> [String] {
    guard let address = ListenAddress(config.listen) else { return [] }
    if !address.isLoopback {
      logger.log(
        .warn, "listen_unauthenticated",
        ["address": config.listen, "advice": "keep TCP on loopback or behind a proxy"])
    }
    let fd = ts_listen_tcp(address.host, address.port, 1024)
    guard fd >= 0 else { throw ServerError.system("listen on \(config.listen)", -fd) }
    try server.listen(on: fd)
    return [address.endpoint(port: Int(ts_local_port(fd)))]
  }

  /// Starts the event loop, and the desktop's services when configured. When the bus goes
  /// away (the session ended), the daemon stops, as a session's services do.
  public func start() {
    server.start()
    desktop?.start { [self] reason in
      logger.log(.warn, "dbus_ended", ["reason": reason])
      stop(drainTimeout: config.drainTimeout)
    }
  }

  /// Reads what may have changed on disk since start (on SIGHUP): the installed thumbnailer
  /// entries (their folders are also watched), and `GetSupported` answers with them.
  public func reload() {
    guard let delegation else { return }
    Self.reload(delegation, desktop, logger: logger, cause: "signal")
  }

  private static func reload(
    _ delegation: DesktopDelegation, _ desktop: DesktopBus?, logger: Logger, cause: String
  ) {
    delegation.reload()
    desktop?.refreshSupported()
    logger.log(
      .info, "installed_thumbnailers",
      ["types": String(delegation.mediaTypes.count), "reloaded": cause])
  }

  /// Stops accepting and lets work in flight finish for up to `drainTimeout` seconds; desktop
  /// requests end at once (with `Finished`).
  public func stop(drainTimeout: Double) {
    entryWatch?.stop()
    desktop?.stop()
    server.stop(drainTimeout: drainTimeout)
  }

  /// The D-Bus services when `dbus` is set: on `session` (the user's session bus) or the
  /// address given, writing the user's thumbnail cache, with the daemon's decode limits.
  private static func desktopBus(
    _ config: DaemonConfig, _ pipeline: ThumbnailPipeline, version: String,
    delegation: DesktopDelegation?, frames: VideoFrames?
  ) throws -> DesktopBus? {
    guard !config.dbus.isEmpty else { return nil }
    guard
      let directory = FreedesktopCache.defaultDirectory(environment: SystemFiles.environment)
    else {
      throw StartupError(message: "dbus: neither XDG_CACHE_HOME nor HOME names a cache folder")
    }
    let thumbnailer = DesktopThumbnailer(
      cache: FreedesktopCache(directory: directory, software: "thumbd \(version)"),
      thumbnailer: Self.thumbnailer(config, frames: frames),
      maxSourceBytes: config.maxSourceBytes)
    return try DesktopBus(
      address: config.dbus == "session" ? "" : config.dbus,
      jobs: DesktopJobs(
        pipeline: pipeline, thumbnailer: thumbnailer, delegate: delegation),
      window: Self.decodeThreads(config) * (delegation == nil ? 1 : Self.childrenPerThread))
  }

  /// With installed thumbnailers, the desktop service runs this many files per decode thread
  /// at once: a sandboxed child spends most of a small file's time starting (namespaces, the
  /// program's own start), not on a core, and a native file past the decode threads waits
  /// for one in the pipeline's queue. Measured in docs/BENCHMARKS.md ("Installed
  /// thumbnailers against tumbler").
  static let childrenPerThread = 3

  /// The installed thumbnailers, for the types thumbd does not decode, when a sandbox works
  /// here; otherwise a warning says why none is used.
  private static func delegation(native: [String], logger: Logger) -> DesktopDelegation? {
    let delegation: DesktopDelegation
    switch DesktopDelegation.installed(environment: SystemFiles.environment, native: native) {
    case .failure(let reason):
      logger.log(.warn, "installed_thumbnailers_unused", ["reason": reason.text])
      return nil
    case .success(let found): delegation = found
    }
    for (source, reason) in delegation.skipped {
      logger.log(.info, "thumbnailer_entry_skipped", ["entry": source, "reason": reason])
    }
    logger.log(
      .info, "installed_thumbnailers",
      [
        "types": String(delegation.mediaTypes.count),
        "folders": delegation.folders.joined(separator: ":"),
      ])
    return delegation
  }

  /// After the loop has stopped: lets the last disk-cache writes land, within
  /// `drain_timeout`, so a restart finds them.
  public func flushDiskWrites() async {
    let pipeline = pipeline
    let drainTimeout = config.drainTimeout
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await pipeline.flushDiskWrites() }
      group.addTask { try? await Task.sleep(for: .seconds(min(drainTimeout, 3600))) }
      await group.next()
      group.cancelAll()
    }
  }

  private static func sourceLoader(_ config: DaemonConfig, version: String) throws -> SourceLoader {
    for root in config.fileRoots {
      if let problem = SourcePolicy.fileRootProblem(root) {
        throw StartupError(message: "file_roots: \(problem)")
      }
    }
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
          userAgent: "thumbd/\(version)"))
    }
    let freshness = FreshnessRules(
      defaultTTL: config.sourceDefaultTTL, minTTL: config.sourceMinTTL,
      maxTTL: config.sourceMaxTTL, staleWhileRevalidate: config.staleWhileRevalidate,
      staleIfError: config.staleIfError)
    return SourceLoader(
      policy: policy, limits: limits, freshness: freshness, transport: transport,
      resolver: SystemResolver(cacheSeconds: config.dnsCacheSeconds))
  }

  /// The decoder with the configured limits and AVIF speed, and video frames when the
  /// worker runs here.
  private static func thumbnailer(
    _ config: DaemonConfig, placeholders: Bool = false, frames: VideoFrames?
  ) -> Thumbnailer {
    let limits = DecodingLimits(
      maxWidth: config.maxDimension, maxHeight: config.maxDimension, maxPixels: config.maxPixels,
      decodeTimeout: config.decodeTimeout)
    var thumbnailer = Thumbnailer(limits: limits)
    thumbnailer.avifSpeed = config.avifSpeed
    thumbnailer.makesPlaceholders = placeholders
    thumbnailer.frames = frames
    return thumbnailer
  }

  /// Video frames from the sandboxed worker, when it runs here; otherwise a warning says why
  /// videos are refused.
  private static func videoFrames(_ config: DaemonConfig, logger: Logger) -> VideoFrames? {
    guard config.videoFrames else { return nil }
    switch VideoFrames.installed(
      environment: SystemFiles.environment, deadline: .seconds(config.decodeTimeout))
    {
    case .failure(let reason):
      logger.log(.warn, "video_frames_unavailable", ["reason": reason.text])
      return nil
    case .success(let frames):
      logger.log(.info, "video_frames", ["worker": frames.worker])
      return frames
    }
  }

  /// The watermarks, each decoded once; a `StartupError` naming the one that is unusable.
  private static func watermarks(_ config: DaemonConfig) throws -> [String: Watermark] {
    var table: [String: Watermark] = [:]
    for definition in config.watermarks {
      let parts = definition.split(separator: "=", maxSplits: 1).map(String.init)
      guard parts.count == 2, !parts[0].isEmpty, table[parts[0]] == nil else {
        throw StartupError(message: "watermarks: '\(definition.prefix(64))' is not a new NAME=PATH")
      }
      do {
        table[parts[0]] = try Watermark(name: parts[0], contentsOf: parts[1])
      } catch {
        throw StartupError(message: "watermarks: \(parts[0]): \(error.description)")
      }
    }
    return table
  }

  /// The presets, checked; a `StartupError` naming the one that is unusable.
  private static func presets(_ config: DaemonConfig) throws -> Presets {
    do {
      return try Presets(definitions: config.presets, only: config.presetsOnly)
    } catch {
      throw StartupError(message: "presets: \(error.description)")
    }
  }

  /// The signing keys, when configured; a `StartupError` naming the setting when unusable.
  private static func signing(_ config: DaemonConfig) throws -> URLSignature? {
    guard !config.signingKeys.isEmpty || !config.signingSalts.isEmpty else { return nil }
    do {
      return try URLSignature(
        keys: config.signingKeys, salts: config.signingSalts, size: config.signatureSize)
    } catch {
      throw StartupError(message: error.description)
    }
  }

  /// `decode_threads`, or one per core.
  private static func decodeThreads(_ config: DaemonConfig) -> Int {
    config.decodeThreads == 0 ? ThumbnailPipeline.coreCount : config.decodeThreads
  }

  private static func pipelineConfiguration(
    _ config: DaemonConfig, _ loader: SourceLoader, _ storage: StorageHealth,
    frames: VideoFrames?
  ) throws -> ThumbnailPipeline.Configuration {
    let disk =
      try config.cacheDir.isEmpty
      ? nil
      : DiskCache(
        directory: config.cacheDir, sizeLimit: config.diskLimit,
        maxEntriesPerGroup: config.maxVariantsPerSource, onFault: storage.record)
    return ThumbnailPipeline.Configuration(
      dataLoader: loader,
      thumbnailer: Self.thumbnailer(config, placeholders: config.placeholders, frames: frames),
      memoryCacheCostLimit: config.memoryLimit, memoryCacheCountLimit: config.memoryCountLimit,
      maxConcurrentFetches: config.fetchConcurrency, maxFetchesPerOrigin: config.originConnections,
      decodeThreads: Self.decodeThreads(config),
      maxQueuedDecodes: config.maxQueuedDecodes,
      maxPrefetchInProgress: config.prefetchConcurrency, diskCache: disk,
      negativeCacheSeconds: config.negativeCacheSeconds, memoryBudget: config.memoryBudget,
      trimWhenIdle: config.idleTrim, maxVariantsPerSource: config.maxVariantsPerSource,
      placeholderCache: config.cacheDir.isEmpty || !config.placeholders
        ? nil
        : try DiskCache(
          directory: config.cacheDir + "/placeholders", sizeLimit: 16 << 20,
          maxEntriesPerGroup: 16, fileExtension: "tdp", onFault: storage.record))
  }
}

extension Daemon {
  /// The client hints `config` turns on, or nil. Every size hints can reach for one source must
  /// fit in what it keeps (`max_variants_per_source`), or cycling hints on one URL is a miss
  /// every time.
  static func clientHints(_ config: DaemonConfig) throws -> ClientHints? {
    guard config.clientHints else { return nil }
    let hints = ClientHints(
      maxWidth: config.clientHintsMaxWidth, maxDPR: Double(config.clientHintsMaxDPR))
    let reachable = hints.variantsPerFormat * ClientHints.formatsPerPath
    if config.maxVariantsPerSource > 0 && reachable > config.maxVariantsPerSource {
      throw StartupError(
        message:
          "client_hints: one source can be asked for \(reachable) hinted sizes and formats, "
          + "over max_variants_per_source (\(config.maxVariantsPerSource)): raise it, or lower "
          + "client_hints_max_width or client_hints_max_dpr")
    }
    return hints
  }
}

/// A part of the configuration the daemon cannot start with, in a sentence naming it.
public struct StartupError: Error, CustomStringConvertible {
  /// What is wrong, naming the option and the value.
  public let message: String
  /// The message.
  public var description: String { message }

  /// An error saying `message`.
  public init(message: String) { self.message = message }
}
