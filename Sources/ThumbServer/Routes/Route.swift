import ImagePipeline

/// One endpoint: its path, the methods it takes and how it answers them. The router's table
/// is a list of these, so a new endpoint is one entry (docs/ARCHITECTURE.md, "Where things
/// go").
public struct Route: Sendable {
  /// The exact path, e.g. `/healthz`.
  public let path: String
  /// The methods answered; others get 405 with `Allow`. A route that takes GET takes HEAD
  /// too, answered as GET without the body.
  public let methods: Set<String>
  /// The request headers (lower-case names) the route reads: the only ones its requests
  /// carry when they reach it (`HTTPRequest.seeing`), and so what, besides the target and
  /// the listener, a response kept for a later request is keyed by (`ReadyResponses`). A
  /// route that starts reading a header names it here, and nowhere else.
  public let reads: Set<String>
  /// Answers a request for `path` with a method the router has already allowed (a HEAD
  /// arrives as it was sent; the connection leaves the body out).
  public let answer: @Sendable (HTTPRequest) -> RouteAnswer

  /// A route for `path` taking `methods` (GET, and so HEAD, by default) that reads the
  /// request headers `reads`.
  public init(
    path: String, methods: Set<String> = ["GET"], reads: Set<String> = [],
    answer: @escaping @Sendable (HTTPRequest) -> RouteAnswer
  ) {
    self.path = path
    self.methods = methods.contains("GET") ? methods.union(["HEAD"]) : methods
    self.reads = Set(reads.map { $0.lowercased() })
    self.answer = answer
  }
}

/// How a route answers: at once, on the event loop (a memory hit, a health check, a refusal),
/// or later, in a task of its own (work to wait for). Either way the request was read once.
public enum RouteAnswer: Sendable {
  /// The response, with where an image came from for the access log.
  case now(HTTPResponse, ResponseSource?)
  /// Work whose response comes when it is done; cancelled when the client goes away.
  case later(@Sendable () async -> (HTTPResponse, ResponseSource?))
}

/// How a response a route made may be given again, byte for byte but its `Date`, to a later
/// request with the same target and the same values of the headers the route reads
/// (`Route.reads`), without the route reading that request again. The route keeps what it read;
/// `again` makes every check and count the route would make for the later request.
public struct ResponseReuse: Sendable {
  /// For a later request with the same key: nil when the kept response still answers it (its
  /// checks made and counted), else the answer to give instead.
  public let again: @Sendable (HTTPRequest) -> RouteAnswer?
  /// Set when one `again` that answered nil also answers every later request that arrived
  /// no later than the request it checked, while `epoch` reads the same as before that check
  /// and the wall-clock second is the same (`ReadyResponses` keeps when it checked).
  public let shared: Shared?
  /// What the response answers, when other targets may be answered by the same kept response:
  /// two responses with the same identity, equal byte for byte (but `Date`) and asked for with
  /// the same headers, are kept once for both targets (`ReadyResponses`). A thumbnail's is its
  /// image request and priority, so the same options written in another order share it.
  public let identity: (any Hashable & Sendable)?

  /// What lets requests share a check.
  public struct Shared: Sendable {
    /// A number that changes whenever what the check found may have stopped holding (for a
    /// thumbnail: the memory cache's removals).
    public let epoch: @Sendable () -> UInt64
    /// Makes the counts and notes of a request that shares a check.
    public let count: @Sendable (HTTPRequest) -> Void

    /// Sharing whose validity `epoch` tells, counted by `count`.
    public init(
      epoch: @escaping @Sendable () -> UInt64, count: @escaping @Sendable (HTTPRequest) -> Void
    ) {
      self.epoch = epoch
      self.count = count
    }
  }

  /// A reuse whose checks `again` makes, shared by requests when `shared` is set, and by
  /// other targets with the same `identity` when it is given.
  public init(
    again: @escaping @Sendable (HTTPRequest) -> RouteAnswer?, shared: Shared? = nil,
    identity: (any Hashable & Sendable)? = nil
  ) {
    self.again = again
    self.shared = shared
    self.identity = identity
  }
}
