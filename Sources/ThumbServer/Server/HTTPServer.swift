import CNetShim
import Foundation
import ImagePipeline
import Synchronization

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
  private struct Completion {
    let connection: UInt64
    let sequence: Int
    let bytes: [UInt8]
    let close: Bool
  }

  private let router: Router
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
  private var thread: Thread?
  private let finishedGate = DispatchSemaphore(value: 0)

  /// Creates a server for `router`; call `listen` and then `start`.
  public init(router: Router, limits: HTTPLimits = HTTPLimits(), maxConnections: Int = 10_000)
    throws
  {
    self.router = router
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
    let thread = Thread { [self] in
      run()
      finishedGate.signal()
    }
    thread.name = "thumbd-event-loop"
    self.thread = thread
    thread.start()
  }

  /// Stops accepting; the loop ends once every connection's answered requests are written.
  public func stop() {
    stopping.store(true, ordering: .relaxed)
    _ = ns_wakeup_signal(wakeup)
  }

  /// Waits until the loop has ended (after `stop`).
  public func wait() { finishedGate.wait() }

  /// Open client connections.
  public var connectionCount: Int { connections.count }

  private func run() {
    var events = [ns_event](repeating: ns_event(), count: 256)
    var stopped = false
    while true {
      if stopping.load(ordering: .relaxed) && !stopped {
        stopped = true
        for (_, fd) in listeners {
          _ = ns_poll_forget(poller, fd)
          close(fd)
        }
        listeners.removeAll()
      }
      if stopped && connections.values.allSatisfy({ $0.inFlight.isEmpty && !$0.hasPendingOutput }) {
        for connection in Array(connections.values) { closeConnection(connection) }
        return
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
    while !connection.stopReading {
      let n = readBuffer.withUnsafeMutableBytes { read(connection.fd, $0.baseAddress, $0.count) }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 {
        // The client went away: its requests lose their only subscriber.
        closeConnection(connection)
        return
      }
      do {
        for request in try connection.parser.feed(readBuffer[0..<n]) {
          dispatch(request, on: connection)
        }
      } catch {
        connection.stopReading = true
        let status = error == .bodyTooLarge ? 413 : 400
        router.count(status)
        let response = HTTPResponse.error(status, kind: "bad_request", message: "\(error)")
        enqueue(
          response.serialized(keepAlive: false), close: true, sequence: connection.nextSequence,
          on: connection)
        connection.nextSequence += 1
        return
      }
      if connection.inFlight.count >= maxPipelined {
        pauseReading(connection)
        return
      }
    }
  }

  private func dispatch(_ request: HTTPRequest, on connection: Connection) {
    let sequence = connection.nextSequence
    connection.nextSequence += 1
    let keepAlive = request.keepAlive
    if !keepAlive { connection.stopReading = true }
    let (router, token) = (router, connection.token)
    connection.inFlight[sequence] = Task { [weak self] in
      let (response, _) = await router.respond(to: request)
      guard !Task.isCancelled else { return }
      self?.complete(
        Completion(
          connection: token, sequence: sequence,
          bytes: response.serialized(keepAlive: keepAlive), close: !keepAlive))
    }
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
      guard let connection = connections[completion.connection] else { continue }
      connection.inFlight[completion.sequence] = nil
      enqueue(
        completion.bytes, close: completion.close, sequence: completion.sequence, on: connection)
      if connection.readPaused && connection.inFlight.count < maxPipelined / 2 {
        resumeReading(connection)
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
    if connection.closeAfterWrite { closeConnection(connection) }
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
