import ImagePipeline
import Synchronization

/// Maps requests to answers through one table of routes (`/v1/thumbnail`, `/healthz`,
/// `/metrics`, and whatever the composition adds, such as the session path's 426), and counts
/// responses by status for `/metrics`. Socket handling lives elsewhere: this type only sees
/// parsed requests.
public final class Router: Sendable {
  /// The thumbnail endpoint.
  public let thumbnails: ThumbnailRoute
  /// The origin fetcher, for its figures in `/metrics`; nil when the loader is another.
  public let fetcher: SourceLoader?
  /// Storage faults, for `/healthz`.
  public let storage: StorageHealth?
  private let statuses = StatusCounts()
  /// The route table: every route by path, the built-in ones and `extra`.
  private let routes: [String: Route]
  /// The imgproxy path form, for targets no route names.
  public let paths: SignedPathRoute?

  /// Creates a router over a pipeline whose data loader is `fetcher` (if it is a
  /// `SourceLoader`), reporting `storage` in health checks, with `extra` routes besides the
  /// built-in ones.
  public init(
    thumbnails: ThumbnailRoute, fetcher: SourceLoader? = nil, storage: StorageHealth? = nil,
    extra: [Route] = [], paths: SignedPathRoute? = nil
  ) {
    self.thumbnails = thumbnails
    self.paths = paths
    self.fetcher = fetcher
    self.storage = storage
    let builtIn = [
      thumbnails.route, Self.healthRoute(storage),
      Self.metricsRoute(thumbnails, fetcher, statuses, paths),
    ]
    routes = Dictionary((builtIn + extra).map { ($0.path, $0) }) { _, later in later }
  }

  /// Reads the request once and answers it: at once when no waiting is needed, else with the
  /// work to wait for. Counted by status when the response is known.
  public func answer(_ request: HTTPRequest) -> RouteAnswer {
    switch route(request) {
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

  private static let healthy = HTTPResponse(
    status: 200, headers: [("Content-Type", "text/plain")], body: Array("ok\n".utf8))

  /// `/healthz`: 200 either way, since serving goes on; the body says `degraded: ...` while
  /// the disk cache has faults (thumbnails are still made, only not all kept).
  private static func healthRoute(_ storage: StorageHealth?) -> Route {
    Route(path: "/healthz") { _ in
      guard let degradation = storage?.degradation else { return .now(healthy, nil) }
      return .now(
        HTTPResponse(
          status: 200,
          headers: [("Content-Type", "text/plain"), ("X-Thumbd-Health", "degraded")],
          body: Array("degraded: \(degradation)\n".utf8)), nil)
    }
  }

  /// `/metrics`: the Prometheus text format.
  private static func metricsRoute(
    _ pipelineRoute: ThumbnailRoute, _ fetcher: SourceLoader?, _ statuses: StatusCounts,
    _ paths: SignedPathRoute?
  ) -> Route {
    let pipeline = pipelineRoute.pipeline
    return Route(path: "/metrics") { _ in
      .later {
        let text = PrometheusExposition.render(
          metrics: pipeline.metrics.snapshot(), workload: await pipeline.workload(),
          requestsByStatus: statuses.snapshot, responsesByFormat: statuses.formats,
          fetcher: fetcher.map(FetcherFigures.init),
          disk: await pipeline.diskCache?.statistics, memory: pipeline.memoryBudget,
          memoryCache: pipeline.memoryCache.statistics,
          logFailures: Logger.writeFailures, invalidSignatures: paths?.invalidSignatures ?? 0,
          clientLimited: pipelineRoute.limiter?.refused ?? 0)
        return (
          HTTPResponse(
            status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
            body: Array(text.utf8)), nil
        )
      }
    }
  }
}

/// Responses by status, and thumbnails by image format, for `/metrics`.
final class StatusCounts: Sendable {
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

  var snapshot: [Int: Int] { counts.withLock { $0.statuses } }

  var formats: [String: Int] { counts.withLock { $0.formats } }
}
