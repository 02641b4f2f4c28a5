import CNetShim
import Dispatch
import ImagePipeline
import Synchronization
import ThumbClient
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// An HTTP/1.1 server on one epoll event loop thread: thousands of idle keep-alive connections
/// cost a few kilobytes each, never a thread. Requests are answered by the router in tasks;
/// responses go back to the loop through a queue and an eventfd, and are written in request
/// order, so pipelining is safe. A client that hangs up cancels only its own requests.
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
  private let maxConnections: Int
  private let maxPipelined = 16
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
  private let maxPendingOutput = 8 << 20
  private let finishedGate = DispatchSemaphore(value: 0)

  /// Creates a server for `router`; call `listen` and then `start`.
  public init(
    router: Router, logger: Logger? = nil, limits: HTTPLimits = HTTPLimits(),
    maxConnections: Int = 10_000
  ) throws {
    self.router = router
    self.logger = logger
    self.limits = limits
    self.maxConnections = maxConnections
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
      let count = ns_poll_wait(poller, &events, Int32(events.count), stopped ? 100 : -1)
      guard count >= 0 else { continue }
      for event in events.prefix(Int(count)) {
        if event.token == 1 {
          _ = ns_wakeup_drain(wakeup)
          deliverCompletions()
        } else if let listener = listeners[event.token] {
          acceptAll(listener)
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

  private func acceptAll(_ listener: Int32) {
    while true {
      let fd = ns_accept(listener)
      if fd < 0 { return }
      guard connections.count < maxConnections else {
        close(fd)
        continue
      }
      nextToken += 1
      let connection = Connection(fd: fd, token: nextToken, limits: limits)
      connections[nextToken] = connection
      _ = ns_poll_watch(poller, fd, UInt32(NS_READABLE | NS_READ_HANGUP), nextToken, 0)
    }
  }

  private func readAvailable(_ connection: Connection) {
    while !connection.stopReading && !connection.readPaused {
      let n = readBuffer.withUnsafeMutableBytes { read(connection.fd, $0.baseAddress, $0.count) }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 {
        // The client went away: its requests lose their only subscriber.
        closeConnection(connection)
        return
      }
      if connection.session != nil {
        receiveFrames(readBuffer[0..<n], on: connection)
        continue
      }
      do {
        var requests = try connection.parser.feed(readBuffer[0..<n])
        while !requests.isEmpty {
          for request in requests where !connection.stopReading {
            if connection.parser.awaitingUpgradeDecision && request == requests.last
              && upgradeToSession(request, on: connection)
            {
              return
            }
            dispatch(request, on: connection)
          }
          requests = connection.parser.awaitingUpgradeDecision ? try connection.parser.resume() : []
        }
      } catch {
        refuse(error, on: connection)
        return
      }
      if connection.inFlight.count >= maxPipelined {
        pauseReading(connection)
        return
      }
    }
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
      parameters: thumbnails.parameters, logger: logger,
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
    if connection.outputOffset == connection.output.count {
      connection.output = bytes
      connection.outputOffset = 0
    } else {
      connection.output += bytes
    }
    flush(connection)
    if connection.session != nil && !connection.readPaused
      && connection.output.count - connection.outputOffset > maxPendingOutput
    {
      // The client is not reading its results: stop taking new work from it until it does.
      pauseReading(connection)
    }
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
        if connection.readPaused && connection.inFlight.count < maxPipelined / 2 {
          resumeReading(connection)
        }
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
      if connection.outputOffset == connection.output.count {
        connection.output = next.bytes
        connection.outputOffset = 0
      } else {
        connection.output += next.bytes
      }
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
    }
    connection.output = []
    connection.outputOffset = 0
    watchWritable(connection, false)
    if connection.closeAfterWrite {
      discardUnreadInput(connection)
      closeConnection(connection)
    } else if connection.session != nil && connection.readPaused {
      resumeReading(connection)
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
