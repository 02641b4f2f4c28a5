import ImagePipeline

/// The daemon's server: an `EventLoop` whose connections start as HTTP/1.1
/// (`HTTPConnectionHandler`, answering through the `Router`) and may be upgraded to the
/// session protocol (`SessionUpgrader`). Requests are answered in request order, so
/// pipelining is safe; a client that hangs up cancels only its own work.
public final class HTTPServer: Sendable {
  private let loop: EventLoop

  /// A server for `router`, whose connections may upgrade to sessions over `sessions` (nil:
  /// no session protocol); call `listen` and then `start`.
  public init(
    router: Router, sessions: SessionConfiguration? = nil, logger: Logger? = nil,
    limits: HTTPLimits = HTTPLimits(), serverLimits: ServerLimits = ServerLimits()
  ) throws {
    let upgraders: [any ProtocolUpgrader] =
      sessions.map { sessions in
        [
          SessionUpgrader(
            pipeline: router.thumbnails.pipeline, parameters: sessions.parameters,
            refusesOverNetwork: sessions.refusesOverNetwork,
            memory: SessionMemory(limit: serverLimits.sessionMemory), logger: logger)
        ]
      } ?? []
    let outputLimit = serverLimits.maxPendingOutput
    var loop: EventLoop!
    loop = try EventLoop(limits: serverLimits, logger: logger) { _ in
      HTTPConnectionHandler(
        router: router, upgraders: upgraders, logger: logger, loop: loop, limits: limits,
        outputLimit: outputLimit)
    }
    self.loop = loop
  }

  /// Adds an already listening socket (from `ts_listen_unix`, `ts_listen_tcp` or systemd).
  public func listen(on fd: Int32) throws { try loop.listen(on: fd) }

  /// Runs the loop on a thread of its own.
  public func start() { loop.start() }

  /// Stops accepting; the loop ends once every in-flight request and session load is answered
  /// and written, or when `drainTimeout` seconds have passed (then the rest is cancelled).
  public func stop(drainTimeout: Double = .infinity) { loop.stop(drainTimeout: drainTimeout) }

  /// Waits until the loop has ended (after `stop`).
  public func wait() { loop.wait() }

  /// Requests and session loads still being worked on when the loop ended: what the drain
  /// deadline cut short.
  public var abandonedAtExit: Int { loop.abandonedAtExit }
}

/// What upgraded session connections are given.
public struct SessionConfiguration: Sendable {
  /// Defaults for the box fields a `load` or `prefetch` leaves out.
  public var parameters: ThumbnailParameters
  /// Whether the TCP listener refuses sessions (403 `unsigned_request`): sessions are not
  /// signed, so with signing keys (and not `allow_unsigned_tcp`) or `presets_only` they are
  /// the Unix socket's alone.
  public var refusesOverNetwork: Bool

  /// Sessions with `parameters`' defaults.
  public init(parameters: ThumbnailParameters, refusesOverNetwork: Bool = false) {
    self.parameters = parameters
    self.refusesOverNetwork = refusesOverNetwork
  }

  /// The route that answers the session path when no upgrade happened: 426 when the
  /// upgrade headers are missing, 403 over TCP when sessions are refused there.
  public var refusalRoute: Route { SessionUpgrader.route(refusesOverNetwork: refusesOverNetwork) }
}
