/// Which sources may be fetched: schemes, hosts, the addresses an origin may have, and the
/// directories `file://` URLs may read. This is the one home of those rules; the fetchers
/// ask it, before resolving, after resolving, and again for every address a transport is
/// about to connect to.
public struct SourcePolicy: Sendable, Hashable {
  /// URL schemes accepted (`http`, `https`, `file`).
  public var allowedSchemes: Set<String>
  /// Hosts accepted for http(s); nil accepts any host that passes the address rules. A
  /// leading dot (".example.com") accepts the domain and its subdomains.
  public var allowedHosts: Set<String>?
  /// When true, every address is accepted. When false (the default), only public addresses
  /// and those in `allowedNetworks` are: loopback, private, link-local, CGNAT and other
  /// non-public ranges are refused, IPv4 hidden inside IPv6 included.
  public var allowPrivateAddresses: Bool
  /// Networks accepted although not public, and nothing else: a sidecar origin on loopback
  /// (`IPNetwork.loopback`), an intranet range.
  public var allowedNetworks: [IPNetwork]
  /// Directories `file://` URLs must stay inside. Empty refuses all.
  public var fileRoots: [String]

  /// Why `root` cannot serve as a file root (missing, not a directory, unreadable), in a
  /// sentence naming it; nil when it can. Roots that fail this are left out of a loader, so
  /// a daemon checks its roots with this first and refuses to start.
  public static func fileRootProblem(_ root: String) -> String? {
    if case .failure(let error) = FileDataLoader.open(root: root) { return error.message }
    return nil
  }

  /// Each root as configured, followed by `->` and its real path where that differs
  /// (`/home/u/Pictures->/mnt/photos`), for a log line.
  public static func describe(fileRoots: [String]) -> [String] {
    fileRoots.map { root in
      guard case .success(let real) = FileDataLoader.open(root: root), real != root else {
        return root
      }
      return root + "->" + real
    }
  }

  /// Creates a policy. The defaults accept public http(s) origins only.
  public init(
    allowedSchemes: Set<String> = ["http", "https"], allowedHosts: Set<String>? = nil,
    allowPrivateAddresses: Bool = false, allowedNetworks: [IPNetwork] = [],
    fileRoots: [String] = []
  ) {
    self.allowedSchemes = allowedSchemes
    self.allowedHosts = allowedHosts
    self.allowPrivateAddresses = allowPrivateAddresses
    self.allowedNetworks = allowedNetworks
    self.fileRoots = fileRoots
  }

  /// Checks what can be judged before any lookup: the scheme, the host allowlist, and names
  /// that are loopback by definition (`localhost`, `*.localhost`: resolvers and libcurl map
  /// them to 127.0.0.1 themselves, whatever DNS says).
  public func check(_ url: SourceURL) throws(FetchError) {
    guard allowedSchemes.contains(url.scheme) else {
      throw .notAllowed("scheme '\(url.scheme)' is not allowed")
    }
    guard url.scheme == "http" || url.scheme == "https" else { return }
    guard allowsHost(url.host) else { throw .notAllowed("host is not on the allowlist") }
    if url.host == "localhost" || url.host.hasSuffix(".localhost") {
      guard allows(.v4(127, 0, 0, 1)) && allows(.v6(Array(repeating: 0, count: 15) + [1])) else {
        throw .notAllowed("\(url.host) is a loopback name")
      }
    }
  }

  /// Whether an origin may be reached at `address`.
  public func allows(_ address: IPAddress) -> Bool {
    if allowPrivateAddresses { return true }
    let endpoint = address.mappedIPv4 ?? address
    if allowedNetworks.contains(where: { $0.contains(endpoint) }) { return true }
    return address.isPublic
  }

  /// Checks every address a host resolved to: one refused address refuses the host, so a
  /// name cannot mix a public answer with a private one.
  func check(_ addresses: [IPAddress], of host: String) throws(FetchError) {
    guard !addresses.isEmpty else { throw .transport("\(host) has no address") }
    guard addresses.allSatisfy(allows) else {
      throw .notAllowed("\(host) resolves to an address that is not allowed")
    }
  }

  /// Whether `host` (lower-cased, no port) is on the allowlist.
  func allowsHost(_ host: String) -> Bool {
    guard let allowedHosts else { return true }
    let host = host.lowercased()
    for entry in allowedHosts {
      let entry = entry.lowercased()
      if entry.hasPrefix(".") {
        if host == entry.dropFirst() || host.hasSuffix(entry) { return true }
      } else if host == entry {
        return true
      }
    }
    return false
  }
}

/// How much of a source is fetched, and for how long.
public struct FetchLimits: Sendable, Hashable {
  /// Largest source accepted, enforced while the body streams in.
  public var maxSourceBytes: Int
  /// Seconds to wait for the origin's response head (name lookup and connect included).
  public var connectTimeout: Double
  /// Seconds for the whole fetch: every redirect hop, retry and backoff.
  public var totalTimeout: Double
  /// Redirects followed; each hop is checked against the policy again.
  public var maxRedirects: Int
  /// Attempts after the first for connect failures, resets, 429, 502, 503 and 504.
  public var retries: Int
  /// First backoff in seconds; it doubles per retry, with equal jitter (each wait between
  /// half and all of it).
  public var retryBackoff: Double

  /// Creates limits: 32 MiB, 5 s to the response head, 20 s in all, 3 redirects, 2 retries
  /// from 0.1 s.
  public init(
    maxSourceBytes: Int = 32 << 20, connectTimeout: Double = 5, totalTimeout: Double = 20,
    maxRedirects: Int = 3, retries: Int = 2, retryBackoff: Double = 0.1
  ) {
    self.maxSourceBytes = maxSourceBytes
    self.connectTimeout = connectTimeout
    self.totalTimeout = totalTimeout
    self.maxRedirects = maxRedirects
    self.retries = retries
    self.retryBackoff = retryBackoff
  }
}
