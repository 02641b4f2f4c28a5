import ImagePipeline

#if canImport(Glibc)
  import Glibc
#endif

/// HTTP/1.1 on one connection: the strict parser, pipelining in order, the router's answers,
/// the access log, and protocol upgrades. Answers that need no waiting (memory hits, health)
/// are written at once on the loop thread; the others come back from their tasks through
/// `EventLoop.execute` and are written in request order.
///
/// Parsed requests wait in `queued` and start only while fewer than `maxPipelined` are in
/// flight and the connection's unwritten output is under its bound; while either holds,
/// reading pauses, so a client that pipelines without reading holds at most that much memory.
final class HTTPConnectionHandler: ConnectionHandler, @unchecked Sendable {
  // @unchecked: loop-thread state only; tasks hop back with EventLoop.execute.
  private let router: Router
  private let upgraders: [any ProtocolUpgrader]
  private let logger: Logger?
  private let loop: EventLoop
  /// The loop's memory-hit fast path, shared by its connections.
  private let hits: HitPath
  private let maxPipelined = 16
  let outputLimit: Int
  private var parser: HTTPRequestParser
  /// Requests parsed but not started.
  private var queued: [HTTPRequest] = []
  /// Requests being answered, by sequence number, so a hang-up can cancel them.
  private var inFlight: [Int: Task<Void, Never>] = [:]
  /// Responses finished out of order, by request sequence number.
  private var finished: [Int: (head: [UInt8], body: [UInt8], close: Bool)] = [:]
  private var nextSequence = 0
  private var nextToWrite = 0
  /// No answer goes out after the one that closes the connection.
  private var closing = false
  /// The first request has not come yet: its head is due from the accept on.
  private var awaitingFirstRequest = true
  /// Whether the connection came through a TCP listener; read once, on the first request.
  /// Whether the connection came over the network, and from which address: read once.
  private var endpoint: (overNetwork: Bool, peer: IPAddress?)?
  /// Queued requests wait for the end of the loop's read pass (`readPassEnded`).
  private var awaitingPassEnd = false

  init(
    router: Router, upgraders: [any ProtocolUpgrader], logger: Logger?, loop: EventLoop,
    hits: HitPath, limits: HTTPLimits, outputLimit: Int
  ) {
    self.router = router
    self.hits = hits
    self.upgraders = upgraders
    self.logger = logger
    self.loop = loop
    self.outputLimit = outputLimit
    parser = HTTPRequestParser(limits: limits, known: hits.knownHeads)
  }

  var hasPartialInput: Bool { awaitingFirstRequest || parser.bufferedBytes > 0 }

  var isIdle: Bool {
    inFlight.isEmpty && queued.isEmpty && finished.isEmpty && parser.bufferedBytes == 0
  }

  var pendingWork: Int { inFlight.count + queued.count }

  func received(_ bytes: ArraySlice<UInt8>, on connection: LoopConnection) -> Bool {
    let complete: [HTTPRequest]
    do {
      complete = try parser.feed(bytes)
    } catch {
      // What came before the bad bytes is answered first, as it would have been had they
      // arrived in a later pass.
      dispatchQueued(connection)
      refuse(status: error == .bodyTooLarge ? 413 : 400, "\(error)", on: connection)
      return true
    }
    guard !complete.isEmpty else { return false }
    awaitingFirstRequest = false
    for var request in complete {
      // A request the poll saw arriving is answered at once: a check of its source made
      // after the poll is fresh for it, so every such request of the pass for one source
      // shares the first one's check. Of the others (pipelined behind it, or read when
      // reading resumed), the first of the pass for its target is answered at once too, with
      // a check of its own; the rest wait for the pass to end, where one check, later than
      // all of them, serves them all. Answers kept to the pass's end cost a second wake-up of
      // their clients on a Unix socket (docs/BENCHMARKS.md, "Freshness").
      let covered = connection.takeArrivalBound()
      request.received = covered
      let now =
        queued.isEmpty
        && (covered != nil || hits.firstOfPass(request, pass: loop.passes))
      queued.append(request)
      if now { dispatchQueued(connection) }
    }
    // Reading stops at the pipelining bound meanwhile, so a client that pipelines without
    // end is not read whole.
    if queued.count >= maxPipelined { connection.pauseReading() }
    if !queued.isEmpty && !awaitingPassEnd {
      awaitingPassEnd = true
      loop.deferUntilRead(connection)
    }
    return true
  }

  func readPassEnded(_ connection: LoopConnection, readBy: ContinuousClock.Instant) {
    awaitingPassEnd = false
    // Read by then: no check made from here on can predate them. The pass's one instant,
    // so the requests of every connection in it can share a check. (A request answered
    // before its pass ends, after a write drained, is stamped when it is answered.)
    for index in queued.indices where queued[index].received == nil {
      queued[index].received = readBy
    }
    dispatchQueued(connection)
  }

  func drained(_ connection: LoopConnection) {
    if connection.readPaused { dispatchQueued(connection) }
  }

  func closed(_ connection: LoopConnection) {
    for task in inFlight.values { task.cancel() }
    inFlight.removeAll()
    queued.removeAll()
  }

  /// Starts queued requests in order while the client keeps up; pauses reading otherwise.
  private func dispatchQueued(_ connection: LoopConnection) {
    while !queued.isEmpty && !closing && connection.isOpen {
      guard inFlight.count < maxPipelined, !connection.isOverOutputBound else {
        connection.pauseReading()
        return
      }
      let request = queued.removeFirst()
      // The parser stopped after the request asking for an upgrade, the last it returned:
      // the bytes behind it may be another protocol. Requests pipelined before it (dispatched
      // one by one as they are queued) are ordinary ones.
      if queued.isEmpty && parser.awaitingUpgradeDecision && request.header("upgrade") != nil {
        if upgrade(request, on: connection) { return }
        dispatch(request, on: connection)
        do {
          queued += try parser.resume()
        } catch {
          refuse(status: error == .bodyTooLarge ? 413 : 400, "\(error)", on: connection)
          return
        }
        continue
      }
      dispatch(request, on: connection)
    }
    if connection.readPaused && queued.isEmpty && inFlight.count < maxPipelined / 2
      && !connection.isOverOutputBound
    {
      connection.resumeReading()
    }
  }

  /// Switches protocols if an upgrader takes `request`. False to serve it as an ordinary
  /// request (which answers the upgrade path with its refusal, such as 426).
  private func upgrade(_ incoming: HTTPRequest, on connection: LoopConnection) -> Bool {
    var request = incoming
    stamp(&request, connection)
    guard let upgrader = upgraders.first(where: { $0.accepts(request) }) else { return false }
    guard inFlight.isEmpty && finished.isEmpty else {
      // Earlier pipelined responses would interleave with the new protocol's bytes.
      refuse(status: 400, "an upgrade must not follow unanswered requests", on: connection)
      return true
    }
    router.count(101)
    let (handler, response) = upgrader.upgrade(connection, request: request)
    write((response, []), close: false, on: connection)
    connection.switchHandler(to: handler, leftover: parser.takeRemainder())
    return true
  }

  private func refuse(status: Int, _ reason: String, on connection: LoopConnection) {
    connection.stopReading()
    queued.removeAll()
    router.count(status)
    logger?.log(.info, "bad_request", ["status": String(status), "reason": reason])
    let response = HTTPResponse.error(status, kind: "bad_request", message: reason)
    write(response.wire(keepAlive: false), close: true, on: connection)
  }

  /// Queues a response in sequence order for the next request number.
  private func write(
    _ bytes: (head: [UInt8], body: [UInt8]), close: Bool, on connection: LoopConnection
  ) {
    let sequence = nextSequence
    nextSequence += 1
    deliver(bytes, close: close, sequence: sequence, on: connection)
  }

  private func dispatch(_ incoming: HTTPRequest, on connection: LoopConnection) {
    var request = incoming
    stamp(&request, connection)
    let headOnly = request.method == "HEAD"
    let sequence = nextSequence
    nextSequence += 1
    let keepAlive = request.keepAlive
    if !keepAlive { connection.stopReading() }
    let answer: RouteAnswer
    switch hits.answer(request, keepAlive: keepAlive, limits: parser.limits) {
    case .kept(let bytes, let response, let source):
      if let logger { Self.logAccess(logger, request, response, source, since: .now) }
      deliver(bytes, close: !keepAlive, sequence: sequence, on: connection)
      return
    case .replaced(let other): answer = other
    case nil: answer = router.answer(request)
    }
    switch answer {
    case .now(let response, let source):
      // Memory hits and health checks: no task, no hand-off between threads.
      if let logger { Self.logAccess(logger, request, response, source, since: .now) }
      // The table makes a kept-alive GET's bytes: they are made once, for it and the wire.
      let made = hits.keep(response, source, for: request, limits: parser.limits)
      let bytes =
        if let made, keepAlive && !headOnly { made } else {
          response.wire(keepAlive: keepAlive, headOnly: headOnly)
        }
      deliver(bytes, close: !keepAlive, sequence: sequence, on: connection)
    case .later(let work):
      let (loop, logger, id) = (loop, logger, connection.id)
      inFlight[sequence] = Task {
        let started = ContinuousClock.now
        let (response, source) = await work()
        if let logger { Self.logAccess(logger, request, response, source, since: started) }
        guard !Task.isCancelled else { return }
        let bytes = response.wire(keepAlive: keepAlive, headOnly: headOnly)
        loop.execute(on: id) { [self] connection in
          inFlight[sequence] = nil
          deliver(bytes, close: !keepAlive, sequence: sequence, on: connection)
          if connection.isOpen { dispatchQueued(connection) }
        }
      }
    }
  }

  /// Whether `fd` is anything but a Unix-domain socket (unknown counts as network: the
  /// stricter answer).
  /// Marks `request` with where its connection came from (looked up once per connection).
  private func stamp(_ request: inout HTTPRequest, _ connection: LoopConnection) {
    if endpoint == nil { endpoint = Self.endpoint(of: connection.fd) }
    request.overNetwork = endpoint?.overNetwork ?? true
    request.peer = endpoint?.peer
  }

  /// Whether `fd` is a network socket (anything but a Unix one counts, including a socket
  /// that cannot be asked), and its peer's address when it has one.
  private static func endpoint(of fd: Int32) -> (overNetwork: Bool, peer: IPAddress?) {
    var address = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let read = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
    }
    guard read == 0 else { return (true, nil) }
    switch Int32(address.ss_family) {
    case AF_UNIX: return (false, nil)
    case AF_INET:
      let bytes = withUnsafeBytes(of: &address) { raw in
        withUnsafeBytes(of: raw.load(fromByteOffset: 0, as: sockaddr_in.self).sin_addr) {
          Array($0)
        }
      }
      return (true, .v4(bytes[0], bytes[1], bytes[2], bytes[3]))
    case AF_INET6:
      let bytes = withUnsafeBytes(of: &address) { raw in
        withUnsafeBytes(of: raw.load(fromByteOffset: 0, as: sockaddr_in6.self).sin6_addr) {
          Array($0)
        }
      }
      let peer = IPAddress.v6(bytes)
      return (true, peer.mappedIPv4 ?? peer)
    default: return (true, nil)
    }
  }

  /// Writes finished responses in request order.
  private func deliver(
    _ bytes: (head: [UInt8], body: [UInt8]), close: Bool, sequence: Int,
    on connection: LoopConnection
  ) {
    finished[sequence] = (bytes.head, bytes.body, close)
    while let next = finished.removeValue(forKey: nextToWrite) {
      nextToWrite += 1
      if closing { break }
      connection.write(next.head, next.body)
      if next.close {
        closing = true
        connection.closeAfterWrite()
      }
    }
  }

  /// One line per request. The source URL is reduced to scheme, host and a hash: paths and
  /// queries can carry credentials.
  private static func logAccess(
    _ logger: Logger, _ request: HTTPRequest, _ response: HTTPResponse, _ source: ResponseSource?,
    since started: ContinuousClock.Instant
  ) {
    guard logger.isEnabled(.info) else { return }
    var fields: [(String, String)] = [
      ("method", request.method), ("path", request.path), ("status", String(response.status)),
      ("bytes", String(response.body.count)),
      ("ms", Logger.milliseconds(ContinuousClock.now - started)),
    ]
    if let source { fields.append(("cache", source.rawValue)) }
    if let format = response.imageFormat { fields.append(("format", format)) }
    if let kind = response.errorKind { fields.append(("error", kind)) }
    if let url = request.queryValue("url") { fields.append(("src", LogRedaction.source(url))) }
    logger.log(.info, "request", fields: fields)
  }
}

/// Takes a connection over from HTTP when a request asks for another protocol (the session
/// upgrade), as SwiftNIO hands upgraders to its upgrade handler. Built where the daemon is
/// composed and given to the server.
protocol ProtocolUpgrader: Sendable {
  /// Whether `request` asks for this protocol, headers and all.
  func accepts(_ request: HTTPRequest) -> Bool
  /// The new protocol's handler for `connection`, and the response that switches to it.
  func upgrade(
    _ connection: LoopConnection, request: HTTPRequest
  ) -> (any ConnectionHandler, [UInt8])
}
