import Synchronization
import ThumbSystem

/// The production data loader: every source is parsed once (`SourceURL`) and checked against
/// the `SourcePolicy`; `file://` paths are read inside the roots, `http(s)://` fetched by
/// `HTTPFetcher` over an `HTTPTransport` (libcurl unless told otherwise).
public final class SourceLoader: DataLoading {
  /// The rules every source, redirect hop and connection must pass.
  public let policy: SourcePolicy
  /// Bytes, time and hops a fetch may take.
  public let limits: FetchLimits
  /// How long what it loads stays fresh.
  public let freshness: FreshnessRules
  /// What the fetcher did, for metrics.
  public let counters = FetchCounters()
  private let files: FileDataLoader
  /// `file://` URLs already resolved to the path their stamp is read from (the lexical rules
  /// depend on nothing but the URL and the roots, and parsing the URL again on every memory
  /// hit cost a fifth of the event loop's time, bench/daemon_vs_nginx.sh), with the last
  /// stamp taken and when.
  private let checkedFiles = MemoryCache<String, CheckedFile>(
    costLimit: Int.max, countLimit: 4096, maxEntryFraction: 1)

  /// One file's confinement, resolved once, and its last stamp, updated in place (replacing
  /// the cache entry on every check cost as much as the `stat`).
  private final class CheckedFile: Sendable {
    let confined: FileDataLoader.Confined
    let last: Mutex<(stamp: FileStamp?, at: ContinuousClock.Instant)?>

    init(_ confined: FileDataLoader.Confined) {
      self.confined = confined
      last = Mutex(nil)
    }
  }

  private let resolver: any NameResolving
  private let transport: Mutex<(any HTTPTransport)?>

  /// Creates a loader enforcing `policy` and `limits`, versions judged by `freshness`. Without
  /// a `transport`, a `CurlTransport` with default options is made on the first http(s)
  /// fetch, so a loader used for files alone never loads libcurl.
  public init(
    policy: SourcePolicy, limits: FetchLimits = FetchLimits(),
    freshness: FreshnessRules = FreshnessRules(), transport: (any HTTPTransport)? = nil,
    resolver: any NameResolving = SystemResolver()
  ) {
    self.policy = policy
    self.limits = limits
    self.freshness = freshness
    self.resolver = resolver
    self.transport = Mutex(transport)
    files = FileDataLoader(roots: policy.fileRoots, maxSourceBytes: limits.maxSourceBytes)
  }

  /// Loads `request.url` or throws a `FetchError` (`CancellationError` when the task is
  /// cancelled); a file whose stamp still equals `request.cached`, or an origin answering
  /// 304, gives `.notModified`.
  public func load(_ request: SourceRequest) async throws -> SourceResponse {
    let source = try request.parsed ?? SourceURL(request.url)
    try policy.check(source)
    switch source.scheme {
    case "file":
      let path = try Self.filePath(of: source)
      let files = self.files
      let freshness = self.freshness.fileFreshness
      // Room for the whole file before it is read (one `fstatat`, as a memory hit's check).
      if let meter = request.meter, let size = files.stamp(path: path)?.size,
        !meter.fits(Int(size))
      {
        try await meter.widen(to: Int(size))
      }
      let response = try await SystemThread.run(name: "thumbd-file") {
        () throws(FetchError) in
        try files.load(path: path, unlessStamped: request.cached, freshness: freshness)
      }
      if case .modified(let bytes, _) = response { request.meter?.count(bytes.count) }
      return response
    case "http", "https":
      let fetcher = HTTPFetcher(
        policy: policy, limits: limits, freshness: freshness, transport: try httpTransport(),
        resolver: resolver, counters: counters, meter: request.meter, watcher: request.watcher)
      return try await fetcher.fetch(source, cached: request.cached)
    default:
      throw FetchError.notAllowed("scheme '\(source.scheme)' is not supported")
    }
  }

  /// A `stat` of a `file://` source, confined like its loads; nil for other schemes and for
  /// a file that cannot be stamped (which then counts as changed and is loaded, or refused).
  /// A stamp taken after `notBefore` is reused: requests for one file read in the same pass
  /// of the event loop share one `stat`, each still checked against the file as it was after
  /// it arrived. A new stamp is recorded as taken at `notBefore`, which it follows, rather
  /// than by reading the clock again: it then serves requests that arrived by `notBefore`,
  /// never a later one.
  public func currentValidator(of url: String, notBefore: ContinuousClock.Instant)
    -> SourceValidator?
  {
    let checked: CheckedFile
    if let known = checkedFiles.value(forKey: url) {
      if let last = known.last.withLock({ $0 }), last.at >= notBefore {
        return last.stamp.map(SourceValidator.file)
      }
      checked = known
    } else {
      guard let source = try? SourceURL(url), source.scheme == "file",
        let path = try? Self.filePath(of: source), let confined = try? files.confine(path)
      else { return nil }
      checked = CheckedFile(confined)
      checkedFiles.setValue(checked, forKey: url, cost: 1)
    }
    let at = notBefore
    let stamp = FileDataLoader.stamp(of: checked.confined)
    checked.last.withLock { last in
      // Two threads may check at once: the later check stays.
      if last == nil || last!.at < at { last = (stamp, at) }
    }
    return stamp.map(SourceValidator.file)
  }

  private static func filePath(of source: SourceURL) throws(FetchError) -> String {
    guard let path = source.filePath else {
      throw FetchError.invalidURL("the file path holds a NUL (%00)")
    }
    return path
  }

  /// Origin connections the transport opened so far (0 before the first http(s) fetch).
  public var connectionsOpened: Int { transport.withLock { $0?.connectionsOpened ?? 0 } }

  private func httpTransport() throws(FetchError) -> any HTTPTransport {
    try transport.withLock { (transport) throws(FetchError) -> any HTTPTransport in
      if let transport { return transport }
      let made = try CurlTransport()
      transport = made
      return made
    }
  }
}
