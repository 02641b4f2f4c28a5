import ImagePipeline
import Synchronization

/// Maps requests to answers through one table of routes, all given by the composition root
/// (`Daemon`: `/v1/thumbnail`, `/healthz`, `/metrics`, the session path's 426, and the rest),
/// and counts responses by status for `/metrics`. Socket handling lives elsewhere: this type
/// only sees parsed requests.
public final class Router: Sendable {
  /// Responses counted by status and format, which `MetricsRoute` reports.
  public let statuses: StatusCounts
  /// The route table: every route by path (a later route for a path replaces an earlier).
  private let routes: [String: Route]
  /// The imgproxy path form, for targets no route names.
  public let paths: SignedPathRoute?

  /// Creates a router answering `routes`, then `paths` for targets no route names, counting
  /// responses into `statuses`.
  public init(
    routes: [Route], paths: SignedPathRoute? = nil, statuses: StatusCounts = StatusCounts()
  ) {
    self.paths = paths
    self.statuses = statuses
    self.routes = Dictionary(routes.map { ($0.path, $0) }) { _, later in later }
  }

  /// Reads the request once and answers it: at once when no waiting is needed, else with the
  /// work to wait for. Counted by status when the response is known.
  public func answer(_ request: HTTPRequest) -> RouteAnswer { counted(route(request)) }

  /// `answer`, counted by status when the response is known (also for an answer a kept
  /// response's reuse gave).
  func counted(_ answer: RouteAnswer) -> RouteAnswer {
    switch answer {
    case .now(let response, let source):
      statuses.count(response)
      return .now(response, source)
    case .later(let work):
      return .later { [self] in
        let (response, source) = await work()
        statuses.count(response)
        return (response, source)
      }
    }
  }

  /// Answers one request, waiting for it if needed.
  public func respond(to request: HTTPRequest) async -> (HTTPResponse, ResponseSource?) {
    switch answer(request) {
    case .now(let response, let source): return (response, source)
    case .later(let work): return await work()
    }
  }

  /// Counts a response the router did not make (a 400 for an unparsable request).
  public func count(_ status: Int) { statuses.count(status) }

  /// Counts a kept response given again (`ReadyResponses`).
  func count(_ response: HTTPResponse) { statuses.count(response) }

  private func route(_ request: HTTPRequest) -> RouteAnswer {
    guard let route = routes[request.path] else {
      if let answer = paths?.answer(request) { return answer }
      return .now(.error(404, kind: "not_found", message: "no such endpoint"), nil)
    }
    guard route.methods.contains(request.method) else {
      let allowed = route.methods.sorted().joined(separator: ", ")
      var response = HTTPResponse.error(
        405, kind: "method_not_allowed", message: "use \(allowed)")
      response.headers.append(("Allow", allowed))
      return .now(response, nil)
    }
    return route.answer(request)
  }
}

/// Responses by status, and thumbnails by image format, for `/metrics`.
public final class StatusCounts: Sendable {
  private let counts = Mutex<(statuses: [Int: Int], formats: [String: Int])>(([:], [:]))

  func count(_ status: Int) { counts.withLock { $0.statuses[status, default: 0] += 1 } }

  /// Counts a response's status and, for an image, its format (a 304 names none).
  func count(_ response: HTTPResponse) {
    let format = response.status == 200 ? response.imageFormat : nil
    counts.withLock {
      $0.statuses[response.status, default: 0] += 1
      if let format { $0.formats[format, default: 0] += 1 }
    }
  }

  /// Counts for the router alone.
  public init() {}

  var snapshot: [Int: Int] { counts.withLock { $0.statuses } }

  var formats: [String: Int] { counts.withLock { $0.formats } }
}
