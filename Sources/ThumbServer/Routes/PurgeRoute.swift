import ImagePipeline

/// `DELETE /v1/source?url=U`: drops every thumbnail of `U` (all sizes, formats and revisions)
/// from memory and disk, with its source bytes, and answers `{"purged": N}`. Accepted on the
/// Unix socket; on a TCP listener only when `network_purge` is set, since anyone who can reach
/// the port could otherwise empty the cache of every source.
public struct PurgeRoute: Sendable {
  /// The pipeline whose caches are purged.
  public let pipeline: ThumbnailPipeline
  /// Whether requests over TCP may purge.
  public let overNetwork: Bool

  /// Creates the route.
  public init(pipeline: ThumbnailPipeline, overNetwork: Bool = false) {
    self.pipeline = pipeline
    self.overNetwork = overNetwork
  }

  /// The route for `/v1/source`.
  public var route: Route {
    Route(path: "/v1/source", methods: ["DELETE"]) { [self] request in answer(request) }
  }

  func answer(_ request: HTTPRequest) -> RouteAnswer {
    if request.overNetwork && !overNetwork {
      return .now(
        .error(
          403, kind: "purge_not_allowed",
          message: "purging is accepted on the Unix socket only (see network_purge)"), nil)
    }
    guard let url = request.queryValue("url"), !url.isEmpty else {
      return .now(.error(400, kind: "bad_request", message: "the url parameter is required"), nil)
    }
    let pipeline = self.pipeline
    return .later {
      let purged = await pipeline.purge(url)
      return (
        HTTPResponse(
          status: 200, headers: [("Content-Type", "application/json")],
          body: Array("{\"purged\":\(purged)}\n".utf8)), nil
      )
    }
  }
}
