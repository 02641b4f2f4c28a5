import ImagePipeline
import Sandbox

/// `GET /metrics`: the Prometheus text format, from the pipeline's figures, the router's
/// response counts, the fetcher's, the signed path form's and the client limiter's.
public struct MetricsRoute: Sendable {
  /// The thumbnail endpoint: its pipeline and its client limiter.
  public let thumbnails: ThumbnailRoute
  /// The origin fetcher; nil when the loader is another.
  public let fetcher: SourceLoader?
  /// The router's response counts.
  public let statuses: StatusCounts
  /// The imgproxy path form, for its refused signatures.
  public let paths: SignedPathRoute?
  /// The installed thumbnailers' runs, when the desktop service has them.
  package let delegation: DesktopDelegation?
  /// The video worker's runs, when videos are read.
  package let frames: VideoFrames?

  /// Creates the route.
  public init(
    thumbnails: ThumbnailRoute, fetcher: SourceLoader? = nil, statuses: StatusCounts,
    paths: SignedPathRoute? = nil
  ) {
    self.init(
      thumbnails: thumbnails, fetcher: fetcher, statuses: statuses, paths: paths, delegation: nil,
      frames: nil)
  }

  /// Creates the route, with the installed thumbnailers' runs and the video worker's.
  package init(
    thumbnails: ThumbnailRoute, fetcher: SourceLoader?, statuses: StatusCounts,
    paths: SignedPathRoute?, delegation: DesktopDelegation?, frames: VideoFrames?
  ) {
    self.frames = frames
    self.thumbnails = thumbnails
    self.fetcher = fetcher
    self.statuses = statuses
    self.paths = paths
    self.delegation = delegation
  }

  /// The route for `/metrics`.
  public var route: Route {
    Route(path: "/metrics") { [self] _ in
      .later {
        let pipeline = thumbnails.pipeline
        let text = PrometheusExposition.render(
          metrics: pipeline.metrics.snapshot(), workload: await pipeline.workload(),
          requestsByStatus: statuses.snapshot, responsesByFormat: statuses.formats,
          fetcher: fetcher.map(FetcherFigures.init),
          disk: await pipeline.diskCache?.statistics, memory: pipeline.memoryBudget,
          memoryCache: pipeline.memoryCache.statistics,
          logFailures: Logger.writeFailures, invalidSignatures: paths?.invalidSignatures ?? 0,
          clientLimited: thumbnails.limiter?.refused ?? 0,
          delegated: delegation?.runCounts ?? [:], videoFrames: frames?.runCounts ?? [:],
          videoFrameServers: frames?.serversStarted)
        return (
          HTTPResponse(
            status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
            body: Array(text.utf8)), nil
        )
      }
    }
  }
}
