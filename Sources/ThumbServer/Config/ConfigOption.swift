import ImagePipeline

/// One setting of `thumbd serve`: its config key, flag and environment variable, what it
/// accepts, and how it lands in `DaemonConfig`.
public struct ConfigOption: Sendable {
  /// The key in the JSON config file, e.g. `memory_limit`.
  public let key: String
  /// What the value must be, for messages and `--help`.
  public let expects: String
  /// A flag that takes no value (`--allow-private`).
  public let isSwitch: Bool
  /// The list a list option sets: repeating its flag adds to it instead of replacing it.
  let listField: (WritableKeyPath<DaemonConfig, [String]> & Sendable)?
  /// Repeating the flag adds to the list instead of replacing it.
  public var isList: Bool { listField != nil }
  let apply: @Sendable (inout DaemonConfig, ConfigValue) -> Bool
  /// The flag: the key in kebab case, or a singular for list keys (`--file-root`).
  public let flag: String
  /// `THUMBD_MEMORY_LIMIT`.
  public var environmentName: String { "THUMBD_" + key.uppercased() }

  init(
    _ key: String, flag: String? = nil, expects: String, isSwitch: Bool = false,
    listField: (WritableKeyPath<DaemonConfig, [String]> & Sendable)? = nil,
    apply: @escaping @Sendable (inout DaemonConfig, ConfigValue) -> Bool
  ) {
    self.key = key
    self.flag = flag ?? "--" + key.replacing("_", with: "-")
    self.expects = expects
    self.isSwitch = isSwitch
    self.listField = listField
    self.apply = apply
  }

  /// Looks an option up by config key.
  public static func named(_ key: String) -> ConfigOption? { all.first { $0.key == key } }

  /// Every option, in the order of `Config/thumbd.json`.
  public static let all: [ConfigOption] = [
    text("socket") { $0.socket = $1 },
    ConfigOption("socket_mode", expects: "octal permissions such as \"0660\"") { config, value in
      guard let text = value.string(), let mode = UInt32(text, radix: 8), mode <= 0o777 else {
        return false
      }
      config.socketMode = mode
      return true
    },
    ConfigOption("listen", expects: "IPv4:PORT or [IPv6]:PORT, or \"\" for none") {
      config, value in
      guard let text = value.string(), text.isEmpty || ListenAddress(text) != nil else {
        return false
      }
      config.listen = text
      return true
    },
    text("cache_dir") { $0.cacheDir = $1 },
    bytes("disk_limit", minimum: 1 << 20) { $0.diskLimit = $1 },
    bytes("memory_limit", minimum: 0) { $0.memoryLimit = $1 },
    integer("memory_count_limit", 0...10_000_000) { $0.memoryCountLimit = $1 },
    integer("max_variants_per_source", 0...1_000_000) { $0.maxVariantsPerSource = $1 },
    switchOption("placeholders", \.placeholders),
    bytes("memory_budget", minimum: 16 << 20) { $0.memoryBudget = $1 },
    bytes("memory_process_allowance", minimum: 0) { $0.memoryProcessAllowance = $1 },
    seconds("idle_trim") { $0.idleTrim = $1 },
    integer("malloc_arenas", 0...1024) { $0.mallocArenas = $1 },
    bytes("malloc_mmap_threshold", minimum: 0) { $0.mallocMmapThreshold = $1 },
    bytes("max_source_bytes", minimum: 1) { $0.maxSourceBytes = $1 },
    integer("max_pixels", 1...(1 << 40)) { $0.maxPixels = $1 },
    integer("max_dimension", 1...1_000_000) { $0.maxDimension = $1 },
    seconds("decode_timeout") { $0.decodeTimeout = $1 },
    switchOption("video_frames", \.videoFrames),
    list(
      "allowed_schemes", flag: "--allow-scheme", \.allowedSchemes,
      expects: "a list of http, https, file"
    ) { ["http", "https", "file"].contains($0) },
    list("allowed_hosts", flag: "--allow-host", \.allowedHosts),
    list("file_roots", flag: "--file-root", \.fileRoots),
    switchOption("allow_private", \.allowPrivate),
    list(
      "allowed_networks", flag: "--allow-network", \.allowedNetworks,
      expects: "a list of CIDR networks such as 10.0.0.0/8"
    ) { IPNetwork($0) != nil },
    integer("fetch_concurrency", 1...1024) { $0.fetchConcurrency = $1 },
    integer("origin_connections", 1...256) { $0.originConnections = $1 },
    integer("decode_threads", 0...256) { $0.decodeThreads = $1 },
    integer("max_queued_decodes", 0...1_000_000) { $0.maxQueuedDecodes = $1 },
    integer("prefetch_concurrency", 1...1024) { $0.prefetchConcurrency = $1 },
    integer("event_loops", 0...256) { $0.eventLoops = $1 },
    integer("max_connections", 1...1_000_000) { $0.maxConnections = $1 },
    seconds("header_timeout") { $0.headerTimeout = $1 },
    seconds("idle_timeout") { $0.idleTimeout = $1 },
    bytes("session_memory", minimum: 1 << 20) { $0.sessionMemory = $1 },
    seconds("connect_timeout") { $0.connectTimeout = $1 },
    seconds("request_timeout") { $0.requestTimeout = $1 },
    integer("max_redirects", 0...100) { $0.maxRedirects = $1 },
    integer("fetch_retries", 0...10) { $0.fetchRetries = $1 },
    seconds("dns_cache_seconds") { $0.dnsCacheSeconds = $1 },
    text("ca_file") { $0.caFile = $1 },
    text("ca_path") { $0.caPath = $1 },
    choice("default_format") { (config, format: OutputFormat) in
      config.defaultFormat = format.rawValue
    },
    integer("default_quality", 1...100) { $0.defaultQuality = $1 },
    switchOption("auto_avif", \.autoAVIF),
    integer("avif_speed", 0...9) { $0.avifSpeed = $1 },
    integer("max_animation_frames", 1...ThumbnailSpec.maxAnimationFrames) {
      $0.maxAnimationFrames = $1
    },
    choice("colour") { $0.colour = $1 },
    text("cmyk_profile") { $0.cmykProfile = $1 },
    integer("cache_max_age", 0...(10 * 365 * 86_400)) { $0.cacheMaxAge = $1 },
    seconds("source_default_ttl") { $0.sourceDefaultTTL = $1 },
    seconds("source_min_ttl") { $0.sourceMinTTL = $1 },
    seconds("source_max_ttl") { $0.sourceMaxTTL = $1 },
    seconds("stale_while_revalidate") { $0.staleWhileRevalidate = $1 },
    seconds("stale_if_error") { $0.staleIfError = $1 },
    switchOption("network_purge", \.networkPurge),
    list("signing_keys", flag: "--signing-key", \.signingKeys),
    list("signing_salts", flag: "--signing-salt", \.signingSalts),
    integer("signature_size", 1...32) { $0.signatureSize = $1 },
    switchOption("allow_unsigned_tcp", \.allowUnsignedTCP),
    ConfigOption(
      "path_prefix", expects: "\"\" or a path such as \"/img\" (no trailing slash)"
    ) { config, value in
      guard let text = value.string(), text.isEmpty || PathPrefix.isValid(text) else {
        return false
      }
      config.pathPrefix = text
      return true
    },
    list("presets", flag: "--preset", \.presets),
    list(
      "watermarks", flag: "--watermark", \.watermarks, expects: "a list of NAME=PATH",
      valid: { $0.contains("=") }),
    switchOption("presets_only", \.presetsOnly),
    switchOption("client_hints", \.clientHints),
    integer("client_hints_max_width", 32...16_384) { $0.clientHintsMaxWidth = $1 },
    integer("client_hints_max_dpr", 1...4) { $0.clientHintsMaxDPR = $1 },
    ConfigOption("client_miss_rate", expects: "an integer in 0...1000000, or auto") {
      config, value in
      if value.string() == "auto" {
        config.clientMissRate = nil
        return true
      }
      guard let rate = value.integer(in: 0...1_000_000) else { return false }
      config.clientMissRate = rate
      return true
    },
    integer("client_miss_burst", 1...1_000_000) { $0.clientMissBurst = $1 },
    list(
      "trusted_proxies", flag: "--trusted-proxy", \.trustedProxies,
      expects: "a list of addresses or CIDR blocks"
    ) { IPNetwork($0) != nil },
    ConfigOption("dbus", expects: "\"\" (none), \"session\" or a D-Bus address") {
      config, value in
      guard let text = value.string(), text.utf8.count <= 4096, !text.contains("\0") else {
        return false
      }
      config.dbus = text
      return true
    },
    seconds("negative_cache_seconds") { $0.negativeCacheSeconds = $1 },
    choice("log_level") { $0.logLevel = $1 },
    choice("log_format") { $0.logFormat = $1 },
    text("log_file") { $0.logFile = $1 },
    seconds("drain_timeout") { $0.drainTimeout = $1 },
  ]

  /// An option whose value `parse` reads (nil refuses it) and `set` stores: the one shape
  /// of every option kind below but lists.
  private static func parsed<Value>(
    _ key: String, expects: String, isSwitch: Bool = false,
    _ parse: @escaping @Sendable (ConfigValue) -> Value?,
    _ set: @escaping @Sendable (inout DaemonConfig, Value) -> Void
  ) -> ConfigOption {
    ConfigOption(key, expects: expects, isSwitch: isSwitch) { config, value in
      guard let parsed = parse(value) else { return false }
      set(&config, parsed)
      return true
    }
  }

  /// A switch: `true` or `false` in the file and the environment; the flag alone turns it on.
  private static func switchOption(
    _ key: String, _ field: WritableKeyPath<DaemonConfig, Bool> & Sendable
  ) -> ConfigOption {
    parsed(
      key, expects: "true or false", isSwitch: true, { $0.boolean() },
      { $0[keyPath: field] = $1 })
  }

  /// One of a `NamedChoice`'s names.
  private static func choice<Choice: NamedChoice>(
    _ key: String, _ set: @escaping @Sendable (inout DaemonConfig, Choice) -> Void
  ) -> ConfigOption {
    parsed(key, expects: Choice.names, { $0.string().flatMap(Choice.init(rawValue:)) }, set)
  }

  private static func text(
    _ key: String, _ set: @escaping @Sendable (inout DaemonConfig, String) -> Void
  ) -> ConfigOption {
    parsed(key, expects: "a string", { $0.string() }, set)
  }

  /// A list option: its flag names one entry and adds it; the file and the environment give
  /// the whole list. Each entry must pass `valid`.
  private static func list(
    _ key: String, flag: String, _ field: WritableKeyPath<DaemonConfig, [String]> & Sendable,
    expects: String = "a list of strings",
    valid: @escaping @Sendable (String) -> Bool = { _ in true }
  ) -> ConfigOption {
    ConfigOption(key, flag: flag, expects: expects, listField: field) { config, value in
      guard let values = value.strings(), values.allSatisfy(valid) else { return false }
      config[keyPath: field] = values
      return true
    }
  }

  private static func integer(
    _ key: String, _ range: ClosedRange<Int>,
    _ set: @escaping @Sendable (inout DaemonConfig, Int) -> Void
  ) -> ConfigOption {
    parsed(
      key, expects: "an integer in \(range.lowerBound)...\(range.upperBound)",
      { $0.integer(in: range) }, set)
  }

  private static func bytes(
    _ key: String, minimum: Int, _ set: @escaping @Sendable (inout DaemonConfig, Int) -> Void
  ) -> ConfigOption {
    parsed(
      key, expects: "a byte size of at least \(minimum), such as 64MiB or 1G",
      { $0.byteSize().flatMap { $0 >= minimum ? $0 : nil } }, set)
  }

  private static func seconds(
    _ key: String, _ set: @escaping @Sendable (inout DaemonConfig, Double) -> Void
  ) -> ConfigOption {
    parsed(key, expects: "a number of seconds (0 to 31536000)", { $0.seconds() }, set)
  }
}

/// `IPv4:PORT` or `[IPv6]:PORT` for the TCP listener.
public struct ListenAddress: Sendable, Hashable {
  /// The address to bind: an IPv4 or IPv6 literal (without brackets).
  public let host: String
  /// The port (0 picks one).
  public let port: UInt16

  /// Parses `IPv4:PORT` or `[IPv6]:PORT`; nil when malformed.
  public init?(_ text: String) {
    guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...])
    else { return nil }
    var host = String(text[..<colon])
    if host.hasPrefix("[") && host.hasSuffix("]") {
      host = String(host.dropFirst().dropLast())
      guard !host.contains("%"), case .v6 = IPAddress(host) else { return nil }
    } else {
      let octets = host.split(separator: ".", omittingEmptySubsequences: false)
      guard octets.count == 4, octets.allSatisfy({ UInt8($0) != nil }) else { return nil }
    }
    self.host = host
    self.port = port
  }

  /// Whether the address is a loopback one (127.0.0.0/8 or ::1).
  public var isLoopback: Bool { host.hasPrefix("127.") || IPAddress(host) == IPAddress("::1") }

  /// `host:port`, with an IPv6 host in brackets.
  public func endpoint(port: Int) -> String {
    host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
  }
}
