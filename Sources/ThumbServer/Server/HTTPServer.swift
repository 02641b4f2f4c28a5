import ImagePipeline

/// The daemon's server: an `EventLoop` whose connections start as HTTP/1.1
/// (`HTTPConnectionHandler`, answering through the `Router`) and may be upgraded to the
/// session protocol (`SessionUpgrader`). Requests are answered in request order, so
/// pipelining is safe; a client that hangs up cancels only its own work.
public final class HTTPServer: Sendable {
  private let loop: EventLoop

  /// A server answering through `router`, whose connections may be taken over by
  /// `upgraders` (the session protocol); the composition root (`Daemon`) builds both. Call
  /// `listen` and then `start`.
  init(
    router: Router, upgraders: [any ProtocolUpgrader] = [], logger: Logger? = nil,
    limits: HTTPLimits = HTTPLimits(), serverLimits: ServerLimits = ServerLimits()
  ) throws {
    let outputLimit = serverLimits.maxPendingOutput
    let passTargets = PassTargets()
    var loop: EventLoop!
    loop = try EventLoop(limits: serverLimits, logger: logger) { _ in
      HTTPConnectionHandler(
        router: router, upgraders: upgraders, logger: logger, loop: loop,
        passTargets: passTargets, limits: limits, outputLimit: outputLimit)
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
