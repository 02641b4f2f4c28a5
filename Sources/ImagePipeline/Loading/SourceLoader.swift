import Foundation

/// The production data loader: checks every source against a `SourcePolicy`, then reads
/// `file://` paths inside the roots or fetches `http(s)://` through `HTTPDataLoader`.
public final class SourceLoader: DataLoading {
  /// The rules every source and redirect must pass.
  public let policy: SourcePolicy
  private let files: FileDataLoader
  private let http: HTTPDataLoader

  /// Creates a loader enforcing `policy`.
  public init(policy: SourcePolicy) {
    self.policy = policy
    files = FileDataLoader(roots: policy.fileRoots, maxSourceBytes: policy.maxSourceBytes)
    http = HTTPDataLoader(policy: policy)
  }

  /// Loads `url` or throws a `FetchError`.
  public func loadData(for url: String) async throws -> [UInt8] {
    guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased()
    else { throw FetchError.invalidURL("not a URL") }
    guard policy.allowedSchemes.contains(scheme) else {
      throw FetchError.notAllowed("scheme '\(scheme)' is not allowed")
    }
    switch scheme {
    case "file":
      guard components.host == nil || components.host == "" || components.host == "localhost" else {
        throw FetchError.notAllowed("file URLs may not name a host")
      }
      let path = components.percentEncodedPath.removingPercentEncoding ?? ""
      let files = self.files
      return try await Self.offPool { () throws(FetchError) in try files.load(path: path) }
    case "http", "https":
      return try await http.load(url)
    default:
      throw FetchError.notAllowed("scheme '\(scheme)' is not supported")
    }
  }

  /// Checks a URL's host against the allowlist and its resolved addresses against the private
  /// address rule. Used for the first request and again for every redirect hop.
  static func check(_ url: URL, policy: SourcePolicy) async throws(FetchError) {
    guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
      policy.allowedSchemes.contains(scheme)
    else { throw .notAllowed("scheme is not allowed") }
    guard let host = url.host, !host.isEmpty else { throw .invalidURL("URL has no host") }
    guard policy.allowsHost(host) else { throw .notAllowed("host is not on the allowlist") }
    if policy.allowPrivateAddresses { return }
    for address in try await HostResolver.addresses(of: host) where !address.isPublic {
      if address.isLoopback && policy.allowLoopback { continue }
      throw .notAllowed("\(host) resolves to a non-public address (\(address))")
    }
  }

  /// Runs blocking file I/O on a thread of its own.
  private static func offPool(
    _ body: @escaping @Sendable () throws(FetchError) -> [UInt8]
  ) async throws(FetchError) -> [UInt8] {
    let result: Result<[UInt8], FetchError> = await withCheckedContinuation { continuation in
      Thread.detachNewThread {
        continuation.resume(returning: Result { () throws(FetchError) in try body() })
      }
    }
    return try result.get()
  }
}
