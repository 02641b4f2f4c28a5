/// `GET /healthz`: 200 either way, since serving goes on; the body says `degraded: ...` while
/// the disk cache has faults (thumbnails are still made, only not all kept).
public struct HealthRoute: Sendable {
  /// Storage faults to report; nil: always healthy.
  public let storage: StorageHealth?

  /// Creates the route.
  public init(storage: StorageHealth? = nil) { self.storage = storage }

  private static let healthy = HTTPResponse(
    status: 200, headers: [("Content-Type", "text/plain")], body: Array("ok\n".utf8))

  /// The route for `/healthz`.
  public var route: Route {
    Route(path: "/healthz") { [storage] _ in
      guard let degradation = storage?.degradation else { return .now(Self.healthy, nil) }
      return .now(
        HTTPResponse(
          status: 200,
          headers: [("Content-Type", "text/plain"), ("X-Thumbd-Health", "degraded")],
          body: Array("degraded: \(degradation)\n".utf8)), nil)
    }
  }
}
