import ImagePipeline
import ThumbProtocol

/// The session protocol on an upgraded connection: frames in, `ClientMessage`s to the
/// `SessionDriver`, `ServerMessage`s out. Results come back from the pipeline through
/// `EventLoop.execute` and are checked against the slot's binding on the loop thread, just
/// before the frame is written: no newer `load` can be applied between the check and the
/// write.
final class SessionHandler: ConnectionHandler, @unchecked Sendable {
  // @unchecked: loop-thread state only; results hop back with EventLoop.execute.
  private var stream: SessionStream!
  private let logger: Logger?
  private let id: ConnectionID
  /// After a `bad_frame`: nothing more is read or sent.
  private var failed = false
  /// A session stops being read while this much output waits for its client.
  let outputLimit = 8 << 20

  init(
    id: ConnectionID, loop: EventLoop, pipeline: ThumbnailPipeline,
    parameters: ThumbnailParameters, memory: SessionMemory, logger: Logger?
  ) {
    self.id = id
    self.logger = logger
    let driver = SessionDriver(
      pipeline: pipeline, client: ClientID(id.value), parameters: parameters, memory: memory
    ) { [weak loop] done in
      loop?.execute(on: id) { connection in
        (connection.handler as? SessionHandler)?.deliver(done, on: connection)
      }
    }
    stream = SessionStream(driver: driver)
    logger?.log(.info, "session_open", ["connection": id.description])
  }

  var hasPartialInput: Bool { stream.bufferedBytes > 0 }
  var isIdle: Bool { false }
  var pendingWork: Int { stream.driver.pendingWork }

  func received(_ bytes: ArraySlice<UInt8>, on connection: LoopConnection) -> Bool {
    guard !failed else { return false }
    switch stream.receive(bytes) {
    case .frames(let count, let output):
      send(output, on: connection)
      return count > 0
    case .failed(let error, let output):
      failed = true
      logger?.log(.info, "bad_frame", ["connection": id.description, "reason": error.message])
      connection.write(output)
      connection.closeAfterWrite()
      return true
    }
  }

  func drained(_ connection: LoopConnection) { connection.resumeReading() }

  func closed(_ connection: LoopConnection) {
    guard !failed else { return }
    stream.driver.close()
    logger?.log(.info, "session_close", ["connection": id.description])
  }

  private func deliver(_ done: FinishedWork, on connection: LoopConnection) {
    guard !failed else { return }
    send(stream.finished(done), on: connection)
  }

  private func send(_ bytes: [UInt8], on connection: LoopConnection) {
    guard !bytes.isEmpty else { return }
    connection.write(bytes)
    // The client is not reading its results: stop taking new work from it until it does.
    if connection.isOpen && connection.isOverOutputBound { connection.pauseReading() }
  }
}

/// Upgrades `GET /v1/session` with `Connection: Upgrade` and `Upgrade: thumbd-session` to the
/// session protocol; answers the path without those headers with 426 (`route`).
struct SessionUpgrader: ProtocolUpgrader {
  let pipeline: ThumbnailPipeline
  let parameters: ThumbnailParameters
  let refusesOverNetwork: Bool
  let memory: SessionMemory
  let logger: Logger?

  func accepts(_ request: HTTPRequest) -> Bool {
    !(refusesOverNetwork && request.overNetwork) && request.path == Wire.sessionPath
      && request.method == "GET"
      && request.header("upgrade")?.lowercased() == Wire.upgradeToken
      && request.header("connection")?.lowercased().split(separator: ",").contains(where: {
        $0.trimmingWhitespace() == "upgrade"
      }) == true
  }

  func upgrade(
    _ connection: LoopConnection, request: HTTPRequest
  ) -> (any ConnectionHandler, [UInt8]) {
    // The formats a session's `auto` loads may become are stated once, by the upgrade
    // request's Accept.
    var parameters = parameters
    parameters.accepted = AcceptedFormats(acceptOf: request)
    let handler = SessionHandler(
      id: connection.id, loop: connection.loop, pipeline: pipeline, parameters: parameters,
      memory: memory, logger: logger)
    return (handler, Wire.upgradeResponse)
  }

  /// This upgrader's answer to the session path when no upgrade happened.
  var refusalRoute: Route { Self.route(refusesOverNetwork: refusesOverNetwork) }

  /// The session path without the upgrade headers: 426, naming the headers; over TCP when
  /// sessions are refused there, 403.
  static func route(refusesOverNetwork: Bool) -> Route {
    Route(path: Wire.sessionPath) { request in
      if refusesOverNetwork && request.overNetwork {
        return .now(
          .error(
            403, kind: "unsigned_request",
            message:
              "the TCP listener takes no sessions (signing_keys or presets_only): use the Unix socket"
          ), nil)
      }
      var response = HTTPResponse.error(
        426, kind: "upgrade_required",
        message: "send Connection: Upgrade and Upgrade: \(Wire.upgradeToken)")
      response.headers.append(("Upgrade", Wire.upgradeToken))
      return .now(response, nil)
    }
  }
}
