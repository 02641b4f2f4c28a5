/// Moves one HTTP exchange: a request out, a response head and body in. Everything a fetch
/// must obey beyond that (the byte cap, redirects, deadlines across hops, retries, the error
/// mapping) lives in `HTTPFetcher`, so a new transport cannot lose a rule.
///
/// A transport must connect only to the addresses in `TransportRequest.addresses`, and must
/// ask `TransportRequest.allowAddress` for each address right before it connects and before
/// it reuses a connection. It must not follow redirects, decompress bodies or use proxies
/// on its own.
public protocol HTTPTransport: Sendable {
  /// Starts an exchange. The receiver's calls come on the transport's own thread, in order,
  /// and `finish` comes exactly once, last; after `cancel`, `finish` comes once the
  /// connection is closed.
  func start(_ request: TransportRequest, receiver: any TransportReceiver) -> any TransportTransfer

  /// Connections opened so far (with keep-alive, far fewer than requests).
  var connectionsOpened: Int { get }
}

extension HTTPTransport {
  /// Transports that do not count connections report none.
  public var connectionsOpened: Int { 0 }
}

/// One exchange in progress.
public protocol TransportTransfer: Sendable {
  /// Ends the exchange: the connection is closed, then the receiver gets `.cancelled`.
  func cancel()
}

/// Gets one exchange's response. Returning false from either method stops the exchange at
/// once (the receiver then gets `.stopped`).
public protocol TransportReceiver: AnyObject, Sendable {
  /// The final response head (never a 1xx).
  func receive(head: ResponseHead) -> Bool
  /// Body bytes as they arrive, never decompressed.
  func receive(body: UnsafeRawBufferPointer) -> Bool
  /// How the exchange ended.
  func finish(_ end: TransportEnd)
}

/// One request, as a transport sends it.
public struct TransportRequest: Sendable {
  /// Where to send it (http or https, no user info).
  public var url: SourceURL
  /// Header fields besides Host and User-Agent.
  public var headers: [(name: String, value: String)]
  /// The addresses `url.host` may be reached at, already checked; empty for an IP literal.
  public var addresses: [IPAddress]
  /// Asked again for every address the transport is about to connect to or reuse.
  public var allowAddress: @Sendable (IPAddress) -> Bool
  /// Seconds until the response head must have arrived.
  public var headTimeout: Double
  /// Seconds until the exchange must have ended.
  public var totalTimeout: Double
  /// A declared body length over this fails before the body (`.tooLarge`).
  public var maxBodyBytes: Int

  /// Creates a request.
  public init(
    url: SourceURL, headers: [(name: String, value: String)] = [], addresses: [IPAddress],
    allowAddress: @escaping @Sendable (IPAddress) -> Bool, headTimeout: Double,
    totalTimeout: Double, maxBodyBytes: Int
  ) {
    self.url = url
    self.headers = headers
    self.addresses = addresses
    self.allowAddress = allowAddress
    self.headTimeout = headTimeout
    self.totalTimeout = totalTimeout
    self.maxBodyBytes = maxBodyBytes
  }
}

/// How an exchange ended.
public enum TransportEnd: Sendable, Hashable {
  /// The whole body was received.
  case complete
  /// The receiver asked to stop.
  case stopped
  /// `cancel()` was called.
  case cancelled
  /// The exchange failed.
  case failed(TransportFailure, String)
}

/// Why an exchange failed.
public enum TransportFailure: Sendable, Hashable {
  /// Every address was refused by `allowAddress`.
  case addressRefused
  /// Connecting failed (refused, unreachable).
  case connect
  /// The connection broke (reset, closed early, nothing sent).
  case reset
  /// No response head before `headTimeout`.
  case headTimeout
  /// The exchange did not end before `totalTimeout`.
  case timeout
  /// TLS failed (handshake, certificate).
  case tls
  /// The declared length is over `maxBodyBytes`.
  case tooLarge
  /// The response broke HTTP (a malformed or oversized head, conflicting lengths).
  case protocolViolation
  /// The transport itself cannot work (libcurl missing).
  case unavailable
  /// Anything else.
  case other

  /// Failures worth another attempt: the origin may answer next time.
  var isRetryable: Bool { self == .connect || self == .reset }
}
