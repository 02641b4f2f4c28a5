import CNetShim
import Dispatch
import ImagePipeline
import Synchronization
import ThumbClient
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Bounds of the server on its clients.
public struct ServerLimits: Sendable, Hashable {
  /// Client connections at once. When all are taken, the connection idle longest is closed
  /// to admit a new one; with none idle, the new one is refused.
  public var maxConnections: Int
  /// Seconds from a connection's accept, or from the first byte of a request head, until the
  /// head must be complete (slow-loris clients are closed then).
  public var headerTimeout: Double
  /// Seconds a kept-alive connection may sit without a request.
  public var idleTimeout: Double
  /// Unwritten output, bytes, past which a connection is not read any further until the client
  /// reads (8 MiB for sessions, whose results are pushed).
  public var maxPendingOutput: Int
  /// Unwritten output over all connections past which no connection with output waiting is
  /// read.
  public var maxTotalPendingOutput: Int
  /// Bytes all sessions' announced, unanswered prefetch items may hold (`SessionMemory`).
  public var sessionMemory: Int

  /// Defaults: 10,000 connections, 10 s for a request head, 60 s idle, 1 MiB of output per
  /// connection and 256 MiB in all, 64 MiB of announced prefetch items.
  public init(
    maxConnections: Int = 10_000, headerTimeout: Double = 10, idleTimeout: Double = 60,
    maxPendingOutput: Int = 1 << 20, maxTotalPendingOutput: Int = 256 << 20,
    sessionMemory: Int = 64 << 20
  ) {
    self.maxConnections = maxConnections
    self.headerTimeout = headerTimeout
    self.idleTimeout = idleTimeout
    self.maxPendingOutput = maxPendingOutput
    self.maxTotalPendingOutput = maxTotalPendingOutput
    self.sessionMemory = sessionMemory
  }
}

/// An HTTP/1.1 server on one epoll event loop thread: thousands of idle keep-alive connections
/// cost a few kilobytes each, never a thread. Requests are answered by the router in tasks;
/// responses go back to the loop through a queue and an eventfd, and are written in request
/// order, so pipelining is safe. A client that hangs up cancels only its own requests.
///
/// Every client is bounded: requests are not read while a connection has more than
/// `maxPendingOutput` unwritten (immediate answers included) or 16 in flight; request heads
/// must arrive within `headerTimeout` and idle connections go after `idleTimeout`; a full
/// connection table closes its longest-idle connection for a new one; running out of
/// descriptors sheds the new connection with a reserved descriptor and pauses accepting for
/// 100 ms instead of spinning.
public final class HTTPServer: @unchecked Sendable {
  // @unchecked: loop state is touched only on the loop thread; `completions` and `stopping`
  // are the only cross-thread state and sit behind a Mutex / Atomic.
  private enum Completion {
    /// A response to request `sequence` of a connection.
    case http(connection: UInt64, sequence: Int, bytes: [UInt8], close: Bool)
    /// A session result, checked against the slot's binding before it is written.
    case session(connection: UInt64, SessionResult)
  }

  private let router: Router
  private let logger: Logger?
  private let limits: HTTPLimits
  private let serverLimits: ServerLimits
  private let maxPipelined = 16
  /// Unwritten output of every connection together.
  private var totalPendingOutput = 0
  /// A descriptor kept open to be given up when accept finds none left.
  private var reserveDescriptor: Int32 = -1
  /// Listeners not watched until the given monotonic time (after descriptor exhaustion).
  private var resting: [UInt64: UInt64] = [:]
  private var lastSweep: UInt64 = 0
  /// Every session's prefetch items, bounded together.
  private let sessionMemory: SessionMemory
  private var lastExhaustionLog: UInt64 = 0
  private let poller: Int32
  private let wakeup: Int32
  private var listeners: [UInt64: Int32] = [:]
  private var connections: [UInt64: Connection] = [:]
  private var nextToken: UInt64 = 16
  /// One read buffer for every connection: only the loop thread reads.
  private var readBuffer = [UInt8](repeating: 0, count: 65536)
  private let completions = Mutex<[Completion]>([])
  private let stopping = Atomic<Bool>(false)
  /// Seconds granted to in-flight work after `stop`, as the bit pattern of a Double.
  private let drainSeconds = Atomic<UInt64>(Double.infinity.bitPattern)
  /// A session connection stops being read while this much output waits for the client.
  private let maxSessionPendingOutput = 8 << 20
  private let finishedGate = DispatchSemaphore(value: 0)

  /// Creates a server for `router`; call `listen` and then `start`.
  public init(
    router: Router, logger: Logger? = nil, limits: HTTPLimits = HTTPLimits(),
    serverLimits: ServerLimits = ServerLimits()
  ) throws {
    self.router = router
    self.logger = logger
    self.limits = limits
    self.serverLimits = serverLimits
    sessionMemory = SessionMemory(limit: serverLimits.sessionMemory)
    reserveDescriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
    poller = ns_poll_create()
    wakeup = ns_wakeup_create()
    guard poller >= 0, wakeup >= 0 else { throw ServerError.system("epoll", -poller) }
    _ = ns_poll_watch(poller, wakeup, UInt32(NS_READABLE), 1, 0)
  }

  /// Adds an already listening socket (from `ns_listen_unix`, `ns_listen_tcp` or systemd).
  public func listen(on fd: Int32) throws {
    nextToken += 1
    listeners[nextToken] = fd
    let status = ns_poll_watch(poller, fd, UInt32(NS_READABLE), nextToken, 0)
    guard status == 0 else { throw ServerError.system("watch listener", -status) }
  }

  /// Runs the loop on a thread of its own.
  public func start() {
    SystemThread.detach(name: "thumbd-loop") { [self] in
      run()
      finishedGate.signal()
    }
  }

  /// Stops accepting; the loop ends once every in-flight request and session load is answered
  /// and written, or when `drainTimeout` seconds have passed (then the rest is cancelled).
  public func stop(drainTimeout: Double = .infinity) {
    drainSeconds.store(drainTimeout.bitPattern, ordering: .relaxed)
    stopping.store(true, ordering: .relaxed)
    _ = ns_wakeup_signal(wakeup)
  }

  /// Requests and session loads still being worked on, after `wait` returns: what the drain
  /// deadline cut short.
  public private(set) var abandonedAtExit = 0

  /// Waits until the loop has ended (after `stop`).
  public func wait() { finishedGate.wait() }

  /// Open client connections.
  public var connectionCount: Int { connections.count }

  private func run() {
    var events = [ns_event](repeating: ns_event(), count: 256)
    var stopped = false
    var deadline = ContinuousClock.now
    while true {
      if stopping.load(ordering: .relaxed) && !stopped {
        stopped = true
        let seconds = Double(bitPattern: drainSeconds.load(ordering: .relaxed))
        deadline =
          .now + (seconds.isFinite ? .milliseconds(Int64(seconds * 1000)) : .seconds(1 << 40))
        for (_, fd) in listeners {
          _ = ns_poll_forget(poller, fd)
          close(fd)
        }
        listeners.removeAll()
      }
      if stopped {
        let busy = connections.values.reduce(0) { $0 + $1.pendingWork }
        let writing = connections.values.contains { $0.hasPendingOutput }
        if (busy == 0 && !writing) || ContinuousClock.now >= deadline {
          abandonedAtExit = busy
          for connection in Array(connections.values) { closeConnection(connection) }
          return
        }
      }
      let now = Self.now()
      if now &- lastSweep >= 1_000_000_000 {
        lastSweep = now
        sweep(now)
      }
      wakeRestingListeners(now)
      // Wakes at least once a second while there are connections, for the timeouts.
      let timeout: Int32 = stopped ? 100 : (connections.isEmpty && resting.isEmpty ? -1 : 1000)
      let count = ns_poll_wait(
        poller, &events, Int32(events.count), resting.isEmpty ? timeout : min(timeout, 100))
      guard count >= 0 else { continue }
      for event in events.prefix(Int(count)) {
        if event.token == 1 {
          _ = ns_wakeup_drain(wakeup)
          deliverCompletions()
        } else if let listener = listeners[event.token] {
          acceptAll(event.token, listener)
        } else if let connection = connections[event.token] {
          let hungUp = event.events & UInt32(NS_ERROR | NS_HANGUP | NS_READ_HANGUP) != 0
          if hungUp && (connection.stopReading || connection.readPaused) {
            // No more requests are read from it, so its hang-up is noticed here: its
            // unanswered requests lose their subscriber.
            closeConnection(connection)
          } else if hungUp || event.events & UInt32(NS_READABLE) != 0 {
            readAvailable(connection)
          }
          if connections[event.token] != nil && event.events & UInt32(NS_WRITABLE) != 0 {
            flush(connection)
          }
        }
      }
    }
  }

  private func acceptAll(_ token: UInt64, _ listener: Int32) {
    while true {
      let fd = ns_accept(listener)
      if fd == -EMFILE || fd == -ENFILE {
        shedWithoutDescriptors(token, listener)
        return
      }
      if fd < 0 { return }
      if connections.count >= serverLimits.maxConnections && !closeLongestIdle() {
        close(fd)
        continue
      }
      nextToken += 1
      let connection = Connection(fd: fd, token: nextToken, limits: limits, now: Self.now())
      connections[nextToken] = connection
      _ = ns_poll_watch(poller, fd, UInt32(NS_READABLE | NS_READ_HANGUP), nextToken, 0)
    }
  }

  /// The connection table is full: closes the connection idle longest (nothing in flight,
  /// nothing to write, nothing half-received; sessions are never taken). False when there is
  /// none.
  private func closeLongestIdle() -> Bool {
    guard
      let victim = connections.values.filter(\.isIdle).min(by: { $0.lastActivity < $1.lastActivity }
      )
    else { return false }
    closeConnection(victim)
    return true
  }

  /// accept found no descriptor left (EMFILE/ENFILE). The pending connection would keep the
  /// listener readable and the loop spinning: give up the reserved descriptor to accept it,
  /// close it at once, take the reserve back, and rest the listener for 100 ms.
  private func shedWithoutDescriptors(_ token: UInt64, _ listener: Int32) {
    if reserveDescriptor >= 0 {
      close(reserveDescriptor)
      reserveDescriptor = -1
      let shed = ns_accept(listener)
      if shed >= 0 { close(shed) }
      reserveDescriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }
    _ = ns_poll_forget(poller, listener)
    let now = Self.now()
    resting[token] = now + 100_000_000
    if now &- lastExhaustionLog > 10_000_000_000 {
      lastExhaustionLog = now
      logger?.log(
        .warn, "descriptors_exhausted",
        ["connections": String(connections.count), "action": "new connections shed for 100 ms"])
    }
  }

  private func wakeRestingListeners(_ now: UInt64) {
    for (token, until) in resting where now >= until {
      resting[token] = nil
      if let fd = listeners[token] { _ = ns_poll_watch(poller, fd, UInt32(NS_READABLE), token, 0) }
    }
  }

  /// Closes connections whose request head took too long, kept-alive ones idle too long, and
  /// ones whose client has read none of its answers for as long.
  private func sweep(_ now: UInt64) {
    let header = UInt64(serverLimits.headerTimeout * 1e9)
    let idle = UInt64(serverLimits.idleTimeout * 1e9)
    for connection in Array(connections.values) {
      // While reading is paused for the client's unread answers, a half-read head is ours to
      // finish, not the client's: its clock is the stalled-output one below.
      let reading = !connection.readPaused && connection.queued.isEmpty
      if reading, let since = connection.partialSince, now &- since > header,
        connection.session == nil || connection.session?.hasPartialFrame == true
      {
        logger?.log(.info, "header_timeout", ["connection": String(connection.token)])
        closeConnection(connection)
      } else if connection.isIdle && now &- connection.lastActivity > idle {
        closeConnection(connection)
      } else if connection.hasPendingOutput && now &- connection.lastActivity > idle {
        logger?.log(.info, "write_timeout", ["connection": String(connection.token)])
        closeConnection(connection)
      }
    }
  }

  private static func now() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
  }

  private func readAvailable(_ connection: Connection) {
    while !connection.stopReading && !connection.readPaused && connection.queued.isEmpty {
      let n = readBuffer.withUnsafeMutableBytes { read(connection.fd, $0.baseAddress, $0.count) }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 {
        // The client went away: its requests lose their only subscriber.
        closeConnection(connection)
        return
      }
      let now = Self.now()
      connection.lastActivity = now
      if connection.session != nil {
        receiveFrames(readBuffer[0..<n], on: connection)
        connection.partialSince =
          connection.session?.hasPartialFrame == true ? (connection.partialSince ?? now) : nil
        continue
      }
      let complete: [HTTPRequest]
      do {
        complete = try connection.parser.feed(readBuffer[0..<n])
      } catch {
        refuse(error, on: connection)
        return
      }
      connection.queued += complete
      // A head in progress keeps the time its first byte came (or the accept, for the first
      // request); the next one starts its own clock.
      let partial = connection.parser.bufferedBytes > 0
      connection.partialSince =
        !partial ? nil : complete.isEmpty ? (connection.partialSince ?? now) : now
      dispatchQueued(connection)
      if connections[connection.token] == nil { return }
    }
  }

  /// Starts parsed requests in order while the client keeps up: at most `maxPipelined` in
  /// flight and `maxPendingOutput` unwritten. Reading waits until they are all started.
  private func dispatchQueued(_ connection: Connection) {
    while !connection.queued.isEmpty && !connection.stopReading {
      guard connection.inFlight.count < maxPipelined, !isOverOutputBound(connection) else {
        pauseReading(connection)
        return
      }
      let request = connection.queued.removeFirst()
      if connection.queued.isEmpty && connection.parser.awaitingUpgradeDecision {
        // The parser stopped after this request: the bytes behind it may be frames.
        if upgradeToSession(request, on: connection) { return }
        dispatch(request, on: connection)
        do {
          connection.queued += try connection.parser.resume()
        } catch {
          refuse(error, on: connection)
          return
        }
        continue
      }
      dispatch(request, on: connection)
    }
    if connection.readPaused && connection.queued.isEmpty
      && connection.inFlight.count < maxPipelined / 2 && !isOverOutputBound(connection)
    {
      resumeReading(connection)
    }
  }

  /// Whether the connection's unwritten output should stop its reading.
  private func isOverOutputBound(_ connection: Connection) -> Bool {
    let pending = connection.pendingOutput
    let own = connection.session == nil ? serverLimits.maxPendingOutput : maxSessionPendingOutput
    return pending > own || (pending > 0 && totalPendingOutput > serverLimits.maxTotalPendingOutput)
  }

  private func refuse(_ error: HTTPParseError, on connection: Connection) {
    connection.stopReading = true
    let status = error == .bodyTooLarge ? 413 : 400
    router.count(status)
    logger?.log(.info, "bad_request", ["status": String(status), "reason": "\(error)"])
    let response = HTTPResponse.error(status, kind: "bad_request", message: "\(error)")
    enqueue(
      response.serialized(keepAlive: false), close: true, sequence: connection.nextSequence,
      on: connection)
    connection.nextSequence += 1
  }

  /// Switches the connection to the session protocol if `request` asks for it properly.
  /// Returns false to serve it as an ordinary request.
  private func upgradeToSession(_ request: HTTPRequest, on connection: Connection) -> Bool {
    guard request.path == "/v1/session", request.method == "GET",
      request.header("upgrade")?.lowercased() == "thumbd-session",
      request.header("connection")?.lowercased().split(separator: ",").contains(where: {
        $0.trimmingWhitespace() == "upgrade"
      }) == true
    else { return false }
    guard connection.inFlight.isEmpty && connection.finished.isEmpty else {
      // Earlier pipelined responses would interleave with frames.
      refuse(.malformedTarget, on: connection)
      return true
    }
    router.count(101)
    let head =
      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
      + "Upgrade: thumbd-session\r\n\r\n"
    enqueue(Array(head.utf8), close: false, sequence: connection.nextSequence, on: connection)
    connection.nextSequence += 1
    let (token, thumbnails) = (connection.token, router.thumbnails)
    connection.session = Session(
      pipeline: thumbnails.pipeline, client: ClientID(UInt64(token)),
      parameters: thumbnails.parameters, logger: logger, memory: sessionMemory,
      post: { [weak self] result in self?.complete(.session(connection: token, result)) })
    logger?.log(.info, "session_open", ["connection": String(token)])
    let remainder = connection.parser.takeRemainder()
    if !remainder.isEmpty { receiveFrames(remainder[...], on: connection) }
    return true
  }

  private func receiveFrames(_ bytes: ArraySlice<UInt8>, on connection: Connection) {
    guard let session = connection.session else { return }
    do {
      let immediate = try session.receive(bytes)
      if !immediate.isEmpty { appendOutput(immediate, to: connection) }
    } catch {
      connection.stopReading = true
      logger?.log(
        .info, "bad_frame", ["connection": String(connection.token), "reason": error.message])
      let frame = SessionFrame(header: [
        "op": .string("error"), "code": .string("bad_frame"), "message": .string(error.message),
      ])
      session.close()
      connection.closeAfterWrite = true
      appendOutput(frame.serialized(), to: connection)
    }
  }

  /// Writes session bytes after everything already queued.
  private func appendOutput(_ bytes: [UInt8], to connection: Connection) {
    append(bytes, to: connection)
    flush(connection)
    if connections[connection.token] != nil && connection.session != nil
      && !connection.readPaused && isOverOutputBound(connection)
    {
      // The client is not reading its results: stop taking new work from it until it does.
      pauseReading(connection)
    }
  }

  /// Queues bytes for writing, counting them in the total.
  private func append(_ bytes: [UInt8], to connection: Connection) {
    if connection.outputOffset == connection.output.count {
      connection.output = bytes
      connection.outputOffset = 0
    } else {
      connection.output += bytes
    }
    totalPendingOutput += bytes.count
  }

  private func dispatch(_ request: HTTPRequest, on connection: Connection) {
    let sequence = connection.nextSequence
    connection.nextSequence += 1
    let keepAlive = request.keepAlive
    if !keepAlive { connection.stopReading = true }
    let (router, token, logger) = (router, connection.token, logger)
    if let (response, source) = router.respondImmediately(to: request) {
      // Memory hits and health checks: no task, no hand-off between threads.
      if let logger { Self.logAccess(logger, request, response, source, since: .now) }
      enqueue(
        response.serialized(keepAlive: keepAlive), close: !keepAlive, sequence: sequence,
        on: connection)
      return
    }
    connection.inFlight[sequence] = Task { [weak self] in
      let started = ContinuousClock.now
      let (response, source) = await router.respond(to: request)
      if let logger { Self.logAccess(logger, request, response, source, since: started) }
      guard !Task.isCancelled else { return }
      self?.complete(
        .http(
          connection: token, sequence: sequence, bytes: response.serialized(keepAlive: keepAlive),
          close: !keepAlive))
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
    if let url = request.queryValue("url") { fields.append(("src", LogRedaction.source(url))) }
    logger.log(.info, "request", fields: fields)
  }

  /// From any thread: hands a finished response to the loop.
  private func complete(_ completion: Completion) {
    completions.withLock { $0.append(completion) }
    _ = ns_wakeup_signal(wakeup)
  }

  private func deliverCompletions() {
    let ready = completions.withLock { pending -> [Completion] in
      defer { pending.removeAll() }
      return pending
    }
    for completion in ready {
      switch completion {
      case .http(let token, let sequence, let bytes, let close):
        guard let connection = connections[token] else { continue }
        connection.inFlight[sequence] = nil
        enqueue(bytes, close: close, sequence: sequence, on: connection)
        if connections[token] != nil { dispatchQueued(connection) }
      case .session(let token, let result):
        guard let connection = connections[token], let session = connection.session,
          !connection.closeAfterWrite
        else { continue }
        if let frame = session.resolve(result) { appendOutput(frame, to: connection) }
      }
    }
  }

  private func enqueue(_ bytes: [UInt8], close: Bool, sequence: Int, on connection: Connection) {
    connection.finished[sequence] = (bytes, close)
    while let next = connection.finished.removeValue(forKey: connection.nextToWrite) {
      connection.nextToWrite += 1
      if connection.closeAfterWrite { break }
      append(next.bytes, to: connection)
      if next.close { connection.closeAfterWrite = true }
    }
    flush(connection)
  }

  private func flush(_ connection: Connection) {
    while connection.hasPendingOutput {
      let n = connection.output.withUnsafeBytes {
        send(
          connection.fd, $0.baseAddress! + connection.outputOffset,
          $0.count - connection.outputOffset, Int32(MSG_NOSIGNAL))
      }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
        watchWritable(connection, true)
        return
      }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 {
        closeConnection(connection)
        return
      }
      connection.outputOffset += n
      totalPendingOutput -= n
      connection.lastActivity = Self.now()
    }
    connection.output = []
    connection.outputOffset = 0
    watchWritable(connection, false)
    if connection.closeAfterWrite {
      discardUnreadInput(connection)
      closeConnection(connection)
    } else if connection.session != nil && connection.readPaused {
      resumeReading(connection)
    } else if connection.readPaused {
      dispatchQueued(connection)
    }
  }

  /// Before closing after a final answer (a 400, a `bad_frame`): closing a socket with unread
  /// input makes the kernel reset the connection, and a reset can destroy the answer in the
  /// client's receive buffer before the client reads it. So end our side first and throw away
  /// what the client had already sent (bounded; the socket is non-blocking).
  private func discardUnreadInput(_ connection: Connection) {
    shutdown(connection.fd, Int32(SHUT_WR))
    var discarded = 0
    while discarded < 1 << 20 {
      let n = readBuffer.withUnsafeMutableBytes { read(connection.fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return }
      discarded += n
    }
  }

  private func watchWritable(_ connection: Connection, _ on: Bool) {
    guard connection.watchingWritable != on else { return }
    connection.watchingWritable = on
    updateInterest(connection)
  }

  private func pauseReading(_ connection: Connection) {
    connection.readPaused = true
    updateInterest(connection)
  }

  private func resumeReading(_ connection: Connection) {
    connection.readPaused = false
    updateInterest(connection)
    readAvailable(connection)
  }

  private func updateInterest(_ connection: Connection) {
    var events: UInt32 = UInt32(NS_READ_HANGUP)
    if !connection.readPaused { events |= UInt32(NS_READABLE) }
    if connection.watchingWritable { events |= UInt32(NS_WRITABLE) }
    _ = ns_poll_watch(poller, connection.fd, events, connection.token, 1)
  }

  private func closeConnection(_ connection: Connection) {
    guard connections.removeValue(forKey: connection.token) != nil else { return }
    for task in connection.inFlight.values { task.cancel() }
    connection.inFlight.removeAll()
    if let session = connection.session {
      session.close()
      logger?.log(.info, "session_close", ["connection": String(connection.token)])
    }
    totalPendingOutput -= connection.pendingOutput
    connection.output = []
    connection.outputOffset = 0
    _ = ns_poll_forget(poller, connection.fd)
    close(connection.fd)
  }
}

/// Why the server could not start.
public enum ServerError: Error, CustomStringConvertible {
  /// A system call failed, with its errno.
  case system(String, Int32)

  /// The failing call and the system's words.
  public var description: String {
    switch self {
    case .system(let call, let code): "\(call): \(String(cString: strerror(code)))"
    }
  }
}
