import ImagePipeline
import Synchronization

/// Maps requests to responses: `/healthz`, `/metrics`, `/v1/thumbnail`; counts responses by
/// status for `/metrics`. Socket handling lives elsewhere: this type only sees parsed requests.
public final class Router: Sendable {
  /// The thumbnail endpoint.
  public let thumbnails: ThumbnailRoute
  /// The origin fetcher, for its figures in `/metrics`; nil when the loader is another.
  public let fetcher: SourceLoader?
  /// Storage faults, for `/healthz`.
  public let storage: StorageHealth?
  private let statuses = Mutex<[Int: Int]>([:])

  /// Creates a router over a pipeline whose data loader is `fetcher` (if it is a
  /// `SourceLoader`), reporting `storage` in health checks.
  public init(
    thumbnails: ThumbnailRoute, fetcher: SourceLoader? = nil, storage: StorageHealth? = nil
  ) {
    self.thumbnails = thumbnails
    self.fetcher = fetcher
    self.storage = storage
  }

  /// Answers one request, with where the image came from for logging.
  public func respond(to request: HTTPRequest) async -> (HTTPResponse, ResponseSource?) {
    let (response, source) = await route(request)
    count(response.status)
    return (response, source)
  }

  /// The answer, if it needs no waiting: memory-cache hits and health checks, which the server
  /// then writes from its I/O thread without starting a task.
  public func respondImmediately(to request: HTTPRequest) -> (HTTPResponse, ResponseSource?)? {
    guard request.method == "GET" else { return nil }
    let response: HTTPResponse
    let source: ResponseSource?
    switch request.path {
    case "/v1/thumbnail":
      guard let hit = thumbnails.respondFromMemory(to: request) else { return nil }
      (response, source) = (hit, .memory)
    case "/healthz":
      (response, source) = (health, nil)
    default:
      return nil
    }
    count(response.status)
    return (response, source)
  }

  private static let healthy = HTTPResponse(
    status: 200, headers: [("Content-Type", "text/plain")], body: Array("ok\n".utf8))

  /// 200 either way, since serving goes on; the body says `degraded: ...` while the disk
  /// cache has faults (thumbnails are still made, only not all kept).
  private var health: HTTPResponse {
    guard let degradation = storage?.degradation else { return Self.healthy }
    return HTTPResponse(
      status: 200,
      headers: [("Content-Type", "text/plain"), ("X-Thumbd-Health", "degraded")],
      body: Array("degraded: \(degradation)\n".utf8))
  }

  /// Counts a response the router did not make (a 400 for an unparsable request).
  public func count(_ status: Int) { statuses.withLock { $0[status, default: 0] += 1 } }

  private func route(_ request: HTTPRequest) async -> (HTTPResponse, ResponseSource?) {
    let known = ["/healthz", "/metrics", "/v1/thumbnail", "/v1/session"]
    guard known.contains(request.path) else {
      return (.error(404, kind: "not_found", message: "no such endpoint"), nil)
    }
    guard request.method == "GET" else {
      var response = HTTPResponse.error(405, kind: "method_not_allowed", message: "use GET")
      response.headers.append(("Allow", "GET"))
      return (response, nil)
    }
    switch request.path {
    case "/v1/session":
      // Reached only when the upgrade headers were missing: the server switches protocols
      // before routing otherwise.
      var response = HTTPResponse.error(
        426, kind: "upgrade_required",
        message: "send Connection: Upgrade and Upgrade: thumbd-session")
      response.headers.append(("Upgrade", "thumbd-session"))
      return (response, nil)
    case "/healthz":
      return (health, nil)
    case "/metrics":
      let pipeline = thumbnails.pipeline
      let text = PrometheusExposition.render(
        metrics: pipeline.metrics.snapshot(), workload: await pipeline.workload(),
        requestsByStatus: statuses.withLock { $0 }, fetcher: fetcher.map(FetcherFigures.init),
        disk: await pipeline.diskCache?.statistics, logFailures: Logger.writeFailures)
      return (
        HTTPResponse(
          status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
          body: Array(text.utf8)), nil
      )
    default:
      return await thumbnails.respond(to: request)
    }
  }
}
