import ImagePipeline

/// One endpoint: its path and how it answers a GET. The router's table is a list of these, so
/// a new endpoint is one entry (docs/ARCHITECTURE.md, "Where things go").
public struct Route: Sendable {
  /// The exact path, e.g. `/healthz`.
  public let path: String
  /// Answers a request for `path` with a method the router has already allowed.
  public let answer: @Sendable (HTTPRequest) -> RouteAnswer

  /// A route for `path`.
  public init(path: String, answer: @escaping @Sendable (HTTPRequest) -> RouteAnswer) {
    self.path = path
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
