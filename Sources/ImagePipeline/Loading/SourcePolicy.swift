/// Which sources may be fetched, and how much of them.
public struct SourcePolicy: Sendable, Hashable {
  /// URL schemes accepted (`http`, `https`, `file`).
  public var allowedSchemes: Set<String>
  /// Hosts accepted for http(s); nil accepts any host that passes the address check. A leading
  /// dot (".example.com") accepts the domain and its subdomains.
  public var allowedHosts: Set<String>?
  /// When false, loopback, private, link-local, CGNAT and other non-public addresses are
  /// refused, judged on the resolved addresses, IPv4 inside IPv6 included.
  public var allowPrivateAddresses: Bool
  /// When true, loopback addresses (127/8, ::1) are accepted even if other private addresses
  /// are not: for an origin on the same machine, such as a local nginx.
  public var allowLoopback: Bool
  /// Directories `file://` URLs must stay inside (after resolving symlinks). Empty refuses all.
  public var fileRoots: [String]
  /// Largest source accepted, enforced while the body streams in.
  public var maxSourceBytes: Int
  /// Seconds to wait for the origin's response headers.
  public var connectTimeout: Double
  /// Seconds for the whole transfer.
  public var totalTimeout: Double
  /// Redirects followed; each hop is checked again.
  public var maxRedirects: Int

  /// Creates a policy. The defaults accept public http(s) origins only.
  public init(
    allowedSchemes: Set<String> = ["http", "https"], allowedHosts: Set<String>? = nil,
    allowPrivateAddresses: Bool = false, allowLoopback: Bool = false, fileRoots: [String] = [],
    maxSourceBytes: Int = 32 << 20, connectTimeout: Double = 5, totalTimeout: Double = 20,
    maxRedirects: Int = 3
  ) {
    self.allowedSchemes = allowedSchemes
    self.allowedHosts = allowedHosts
    self.allowPrivateAddresses = allowPrivateAddresses
    self.allowLoopback = allowLoopback
    self.fileRoots = fileRoots
    self.maxSourceBytes = maxSourceBytes
    self.connectTimeout = connectTimeout
    self.totalTimeout = totalTimeout
    self.maxRedirects = maxRedirects
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
