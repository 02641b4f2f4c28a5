import ImagePipeline

/// The daemon's server: event loops (one per core by default, `LoopGroup`) whose connections
/// start as HTTP/1.1 (`HTTPConnectionHandler`, answering through the `Router`) and may be
/// upgraded to the session protocol (`SessionUpgrader`). Requests are answered in request
/// order, so pipelining is safe; a client that hangs up cancels only its own work.
public final class HTTPServer: Sendable {
  private let loops: [EventLoop]
  private let group: LoopGroup

  /// A server of `loops` event loops answering through `router`, whose connections may be
  /// taken over by `upgraders` (the session protocol); the composition root (`Daemon`) builds
  /// both. Call `listen` and then `start`.
  init(
    router: Router, upgraders: [any ProtocolUpgrader] = [], logger: Logger? = nil,
    limits: HTTPLimits = HTTPLimits(), serverLimits: ServerLimits = ServerLimits(),
    loops count: Int = 1
  ) throws {
    let outputLimit = serverLimits.maxPendingOutput
    let group = LoopGroup(size: count)
    var loops: [EventLoop] = []
    for _ in 0..<group.size {
      // Each loop's handlers answer repeated requests of its own read passes.
      let hits = HitPath(router: router)
      let loop = try EventLoop(limits: serverLimits, logger: logger, group: group) { _, loop in
        HTTPConnectionHandler(
          router: router, upgraders: upgraders, logger: logger, loop: loop, hits: hits,
          limits: limits, outputLimit: outputLimit)
      }
      loops.append(loop)
    }
    self.loops = loops
    self.group = group
  }

  /// Adds an already listening socket (from `ts_listen_unix`, `ts_listen_tcp` or systemd):
  /// every loop accepts from it.
  public func listen(on fd: Int32) throws {
    group.share(fd)
    for loop in loops { try loop.listen(on: fd) }
  }

  /// Runs each loop on a thread of its own.
  public func start() { for loop in loops { loop.start() } }

  /// Stops accepting; the loops end once every in-flight request and session load is answered
  /// and written, or when `drainTimeout` seconds have passed (then the rest is cancelled).
  public func stop(drainTimeout: Double = .infinity) {
    for loop in loops { loop.stop(drainTimeout: drainTimeout) }
  }

  /// Waits until every loop has ended (after `stop`).
  public func wait() { for loop in loops { loop.wait() } }

  /// Requests and session loads still being worked on when the loops ended: what the drain
  /// deadline cut short.
  public var abandonedAtExit: Int { loops.reduce(0) { $0 + $1.abandonedAtExit } }
}
