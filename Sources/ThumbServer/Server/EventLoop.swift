import CSystem
import Dispatch
import Synchronization
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
  /// Seconds a kept-alive connection may sit without a request, and a connection with
  /// unwritten output without its client reading any.
  public var idleTimeout: Double
  /// Unwritten output, bytes, past which an HTTP connection is not read any further until the
  /// client reads (sessions, whose results are pushed, have their own limit).
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

/// One epoll thread that owns its connections: accepting, reading, writing, timeouts and the drain
/// at shutdown. A server runs one per core (`LoopGroup`), each accepting from the same listeners; a
/// connection stays on the loop that accepted it. It knows bytes and connections only; what the
/// bytes mean is each connection's `ConnectionHandler`'s business. Thousands of idle connections
/// cost a few kilobytes each, never a thread.
///
/// Every client is bounded here: a connection's handler stops taking work while its output is
/// over the handler's limit (and every connection with output waiting does while all of it is
/// over `maxTotalPendingOutput`); partial input must complete within `headerTimeout`; idle
/// connections go after `idleTimeout`, and so do ones whose client reads nothing for as long;
/// a full table closes its longest-idle connection for a new one (on another loop if this one
/// has none: `adopt`); running out of descriptors sheds the new connection with a reserved
/// descriptor and rests the listener 100 ms instead of spinning.
final class EventLoop: @unchecked Sendable {
  // @unchecked: loop state is touched only on the loop thread (`assertInLoop`); `pending`,
  // `stopping` and `drainSeconds` are the only cross-thread state, behind a Mutex / Atomic.
  private let limits: ServerLimits
  private let logger: Logger?
  /// The server's other loops' share of the bounds, and the listeners.
  private let group: LoopGroup
  /// Makes the handler of each new connection.
  /// Makes a new connection's handler, given the loop it belongs to (passed, not captured:
  /// a factory that held its loop would keep the loop, its connections and everything their
  /// handlers reach alive after it stopped).
  private let accept: (ConnectionID, EventLoop) -> any ConnectionHandler
  private let poller: Int32
  private let wakeup: Int32
  private var listeners: [UInt64: Int32] = [:]
  private var connections: [ConnectionID: LoopConnection] = [:]
  private var nextNumber: UInt64 = 16
  /// One read buffer for every connection: only the loop thread reads.
  private var readBuffer = [UInt8](repeating: 0, count: 65536)
  /// A descriptor kept open to be given up when accept finds none left.
  private var reserveDescriptor: Int32 = -1
  /// Listeners not watched until the given monotonic time (after descriptor exhaustion).
  private var resting: [UInt64: UInt64] = [:]
  /// Connections whose handlers wait for the end of this pass's reads.
  private var deferred: [LoopConnection] = []
  /// Read passes ended so far: handlers that keep bookkeeping per pass start it afresh when
  /// this changes.
  private(set) var passes: UInt64 = 0
  /// Connections whose output drained, for `ConnectionHandler.drained`. A flush never calls
  /// its handler itself: a handler writes from inside its own callbacks, and a flush that
  /// called back into it would nest one level per answer (100,000 pipelined requests answered
  /// at once overflowed the loop's stack). The loop delivers these between events instead.
  private var drainedNotices: [LoopConnection] = []
  private var lastSweep: UInt64 = 0
  private var lastExhaustionLog: UInt64 = 0
  private let pending = Mutex<[@Sendable () -> Void]>([])
  private let stopping = Atomic<Bool>(false)
  /// Seconds granted to in-flight work after `stop`, as the bit pattern of a Double.
  private let drainSeconds = Atomic<UInt64>(Double.infinity.bitPattern)
  private let finishedGate = DispatchSemaphore(value: 0)
  private var thread: pthread_t?

  /// Work still pending when the loop ended: what the drain deadline cut short.
  private(set) var abandonedAtExit = 0

  init(
    limits: ServerLimits, logger: Logger?, group: LoopGroup = LoopGroup(size: 1),
    accept: @escaping (ConnectionID, EventLoop) -> any ConnectionHandler
  ) throws {
    self.limits = limits
    self.logger = logger
    self.group = group
    self.accept = accept
    reserveDescriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
    poller = ts_poll_create()
    wakeup = ts_wakeup_create()
    guard poller >= 0, wakeup >= 0 else { throw ServerError.system("epoll", -poller) }
    _ = ts_poll_watch(poller, wakeup, UInt32(TS_READABLE), 1, 0)
    group.join(self)
  }

  /// Adds an already listening socket (`LoopGroup.share` it first when several loops do).
  func listen(on fd: Int32) throws {
    nextNumber += 1
    listeners[nextNumber] = fd
    let status = ts_poll_watch(poller, fd, listenerEvents, nextNumber, 0)
    guard status == 0 else { throw ServerError.system("watch listener", -status) }
  }

  /// A listener wakes one loop of several for a new connection, not all of them.
  private var listenerEvents: UInt32 {
    UInt32(TS_READABLE) | (group.size > 1 ? UInt32(TS_EXCLUSIVE) : 0)
  }

  /// Runs the loop on a thread of its own.
  func start() {
    SystemThread.detach(name: "thumbd-loop") { [self] in
      thread = pthread_self()
      run()
      finishedGate.signal()
    }
  }

  /// From any thread: stops accepting; the loop ends once no handler has pending work or
  /// unwritten output, or after `drainTimeout` seconds.
  func stop(drainTimeout: Double) {
    drainSeconds.store(drainTimeout.bitPattern, ordering: .relaxed)
    stopping.store(true, ordering: .relaxed)
    _ = ts_wakeup_signal(wakeup)
  }

  /// Waits until the loop has ended.
  func wait() { finishedGate.wait() }

  /// From any thread: runs `work` on the loop thread, soon.
  func execute(_ work: @escaping @Sendable () -> Void) {
    pending.withLock { $0.append(work) }
    _ = ts_wakeup_signal(wakeup)
  }

  /// From any thread: runs `work` on the loop thread with connection `id`, if it is still
  /// open by then.
  func execute(on id: ConnectionID, _ work: @escaping @Sendable (LoopConnection) -> Void) {
    execute { [self] in
      if let connection = connections[id] { work(connection) }
    }
  }

  /// Traps in debug builds when called off the loop thread: loop-owned state is unguarded.
  func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
    assert(
      thread.map { pthread_equal($0, pthread_self()) != 0 } ?? true,
      "loop state touched off the loop thread", file: file, line: line)
  }

  /// Open client connections.
  var connectionCount: Int { connections.count }

  private func run() {
    var events = [ts_event](repeating: ts_event(), count: 256)
    var stopped = false
    var deadline = ContinuousClock.now
    while true {
      if stopping.load(ordering: .relaxed) && !stopped {
        stopped = true
        let seconds = Double(bitPattern: drainSeconds.load(ordering: .relaxed))
        deadline =
          .now + (seconds.isFinite ? .milliseconds(Int64(seconds * 1000)) : .seconds(1 << 40))
        for (_, fd) in listeners {
          _ = ts_poll_forget(poller, fd)
          group.release(fd)
        }
        listeners.removeAll()
      }
      if stopped {
        let busy = connections.values.reduce(0) { $0 + $1.handler.pendingWork }
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
      let count = ts_poll_wait(
        poller, &events, Int32(events.count), resting.isEmpty ? timeout : min(timeout, 100))
      guard count >= 0 else { continue }
      // After the poll: what it reported readable had arrived by now (`arrivalBound`).
      let polled = ContinuousClock.now
      for event in events.prefix(Int(count)) {
        if event.token == 1 {
          _ = ts_wakeup_drain(wakeup)
          runPending()
        } else if let listener = listeners[event.token] {
          acceptAll(event.token, listener)
        } else if let connection = connections[ConnectionID(value: event.token)] {
          let hungUp = event.events & UInt32(TS_ERROR | TS_HANGUP | TS_READ_HANGUP) != 0
          if hungUp && (connection.stopsReading || connection.readPaused) {
            // No more input is read from it, so its hang-up is noticed here: its handler's
            // unanswered work loses its subscriber.
            closeConnection(connection)
          } else if hungUp || event.events & UInt32(TS_READABLE) != 0 {
            connection.arrivalBound = polled
            readAvailable(connection)
            connection.arrivalBound = nil
          }
          if connection.isOpen && event.events & UInt32(TS_WRITABLE) != 0 { flush(connection) }
        }
        deliverDrainedNotices()
      }
      endReadPass()
    }
  }

  /// Tells handlers whose output drained, from the loop itself rather than from inside a
  /// write. A handler may write again meanwhile (and drain again): the loop goes on until
  /// none is left, iterating, never nesting.
  private func deliverDrainedNotices() {
    while !drainedNotices.isEmpty {
      let ready = drainedNotices
      drainedNotices.removeAll(keepingCapacity: true)
      for connection in ready {
        connection.drainedNoticeQueued = false
        if connection.isOpen && !connection.hasPendingOutput {
          connection.handler.drained(connection)
        }
      }
    }
  }

  /// Asks for `connection`'s handler to hear `readPassEnded` once every connection that was
  /// ready in this pass has been read. The HTTP handler answers its repeated requests then,
  /// so that everything a check made while answering sees (a file's `stat`) is later than
  /// every request of the pass, and one check can serve them all.
  func deferUntilRead(_ connection: LoopConnection) {
    assertInLoop()
    deferred.append(connection)
  }

  private func endReadPass() {
    // A handler may read again (resuming a paused connection) and so defer again, or drain.
    while !deferred.isEmpty || !drainedNotices.isEmpty {
      let ready = deferred
      deferred.removeAll()
      // One reading of the clock for the pass: every request in it had arrived by then.
      let readBy = ContinuousClock.now
      for connection in ready where connection.isOpen {
        connection.handler.readPassEnded(connection, readBy: readBy)
      }
      deliverDrainedNotices()
    }
    passes &+= 1
  }

  private func runPending() {
    let ready = pending.withLock { queue -> [@Sendable () -> Void] in
      defer { queue.removeAll() }
      return queue
    }
    for work in ready {
      work()
      deliverDrainedNotices()
    }
  }

  // MARK: - Accepting

  private func acceptAll(_ token: UInt64, _ listener: Int32) {
    while true {
      let fd = ts_accept(listener)
      if fd == -EMFILE || fd == -ENFILE {
        // Out of descriptors, as with a full table: the connection idle longest gives up its
        // own, so idle connections cannot lock every client out (the Unix socket included).
        if closeLongestIdle() {
          noteExhaustion("the longest idle connection closed")
          continue
        }
        // The idle connections may all be on other loops: they are asked in turn, and this
        // loop leaves the listener to them for 100 ms. The last one sheds the connection.
        if group.size > 1, let next = group.loop(after: self) {
          rest(token, listener)
          next.giveWay(on: listener, hops: group.size - 1)
        } else {
          shedWithoutDescriptors(token, listener)
        }
        return
      }
      if fd < 0 { return }
      if group.connections.load(ordering: .relaxed) >= limits.maxConnections
        && !closeLongestIdle()
      {
        // The idle connections may all be on other loops: they are asked in turn.
        if group.size > 1 && group.beginHandoff() {
          handOff(fd, hops: group.size - 1)
        } else {
          close(fd)
        }
        continue
      }
      register(fd)
    }
  }

  private func register(_ fd: Int32) {
    group.connections.add(1, ordering: .relaxed)
    nextNumber += 1
    let id = ConnectionID(value: nextNumber)
    connections[id] = LoopConnection(
      id: id, fd: fd, loop: self, handler: accept(id, self), now: Self.now())
    _ = ts_poll_watch(poller, fd, UInt32(TS_READABLE | TS_READ_HANGUP), id.value, 0)
  }

  /// A new connection (in transit, `LoopGroup.beginHandoff`) for which this loop found the
  /// table full and no idle connection of its own: the next loop is asked, `hops` loops in
  /// all; when none has room or an idle connection to close for it, it is closed.
  private func handOff(_ fd: Int32, hops: Int) {
    guard hops > 0, let next = group.loop(after: self) else {
      group.endHandoff()
      close(fd)
      return
    }
    next.adopt(fd, hops: hops)
  }

  /// From any thread: takes a connection another loop could not (`handOff`) if there is room
  /// by now or this loop closes its longest-idle connection for it; else passes it on.
  func adopt(_ fd: Int32, hops: Int) {
    execute { [self] in
      if !stopping.load(ordering: .relaxed)
        && (group.connections.load(ordering: .relaxed) < limits.maxConnections
          || closeLongestIdle())
      {
        group.endHandoff()
        register(fd)
      } else {
        handOff(fd, hops: hops - 1)
      }
    }
  }

  /// The connection table is full: closes the connection idle longest (its handler has
  /// nothing in flight or half-received, nothing is unwritten). False when there is none.
  private func closeLongestIdle() -> Bool {
    let idle = connections.values.filter { $0.handler.isIdle && !$0.hasPendingOutput }
    guard let victim = idle.min(by: { $0.lastActivity < $1.lastActivity }) else { return false }
    closeConnection(victim)
    return true
  }

  /// From any thread: another loop found no descriptor for a connection waiting on `listener`
  /// and no idle connection of its own. This loop closes its longest-idle one and accepts,
  /// or asks the next, `hops` loops in all; the last sheds the connection.
  func giveWay(on listener: Int32, hops: Int) {
    execute { [self] in
      guard let token = listeners.first(where: { $0.value == listener })?.key else { return }
      if closeLongestIdle() {
        noteExhaustion("the longest idle connection closed")
        acceptAll(token, listener)
      } else if hops > 1, let next = group.loop(after: self) {
        next.giveWay(on: listener, hops: hops - 1)
      } else {
        shedWithoutDescriptors(token, listener)
      }
    }
  }

  /// accept found no descriptor left (EMFILE/ENFILE). The pending connection would keep the
  /// listener readable and the loop spinning: give up the reserved descriptor to accept it,
  /// close it at once, take the reserve back, and rest the listener for 100 ms.
  private func shedWithoutDescriptors(_ token: UInt64, _ listener: Int32) {
    if reserveDescriptor >= 0 {
      close(reserveDescriptor)
      reserveDescriptor = -1
      let shed = ts_accept(listener)
      if shed >= 0 { close(shed) }
      reserveDescriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }
    rest(token, listener)
    noteExhaustion("new connections shed for 100 ms")
  }

  /// Stops watching `listener` for 100 ms (`wakeRestingListeners`).
  private func rest(_ token: UInt64, _ listener: Int32) {
    _ = ts_poll_forget(poller, listener)
    resting[token] = Self.now() + 100_000_000
  }

  /// Logs running out of descriptors, at most once every ten seconds.
  private func noteExhaustion(_ action: String) {
    let now = Self.now()
    guard now &- lastExhaustionLog > 10_000_000_000 else { return }
    lastExhaustionLog = now
    logger?.log(
      .warn, "descriptors_exhausted",
      ["connections": String(connections.count), "action": action])
  }

  private func wakeRestingListeners(_ now: UInt64) {
    for (token, until) in resting where now >= until {
      resting[token] = nil
      if let fd = listeners[token] { _ = ts_poll_watch(poller, fd, listenerEvents, token, 0) }
    }
  }

  // MARK: - Timeouts

  /// Closes connections whose partial input took too long, idle ones, and ones whose client
  /// has read none of its output for as long.
  private func sweep(_ now: UInt64) {
    let header = UInt64(limits.headerTimeout * 1e9)
    let idle = UInt64(limits.idleTimeout * 1e9)
    for connection in Array(connections.values) {
      // While reading is paused for the client's unread output, half-read input is ours to
      // finish, not the client's: its clock is the stalled-output one below.
      if !connection.readPaused, let since = connection.partialSince, now &- since > header,
        connection.handler.hasPartialInput
      {
        logger?.log(.info, "header_timeout", ["connection": connection.id.description])
        closeConnection(connection)
      } else if connection.handler.isIdle && !connection.hasPendingOutput
        && now &- connection.lastActivity > idle
      {
        closeConnection(connection)
      } else if connection.hasPendingOutput && now &- connection.lastActivity > idle {
        logger?.log(.info, "write_timeout", ["connection": connection.id.description])
        closeConnection(connection)
      }
    }
  }

  private static func now() -> UInt64 { MonotonicClock.nanoseconds() }

  // MARK: - Reading and writing

  func readAvailable(_ connection: LoopConnection) {
    assertInLoop()
    while connection.isOpen && !connection.stopsReading && !connection.readPaused {
      let n = readBuffer.withUnsafeMutableBytes { read(connection.fd, $0.baseAddress, $0.count) }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 {
        // The client went away: its work loses its only subscriber.
        closeConnection(connection)
        return
      }
      let now = Self.now()
      connection.lastActivity = now
      let completed = connection.handler.received(readBuffer[0..<n], on: connection)
      // Partial input keeps the time its first byte came (or the accept, for the first
      // request); a read that completed a request or frame starts the clock again for the
      // partial one behind it.
      if !connection.handler.hasPartialInput {
        connection.partialSince = nil
      } else if completed || connection.partialSince == nil {
        connection.partialSince = now
      }
      // A short read emptied the socket's queue: the poller is level-triggered and reports
      // what arrives later, so reading on until EAGAIN would only add a `read` per request
      // (one of the three system calls of a memory hit).
      if n < readBuffer.count { return }
    }
  }

  /// Whether the connection's unwritten output should stop its handler taking more work.
  func isOverOutputBound(_ connection: LoopConnection) -> Bool {
    let pendingBytes = connection.pendingOutput
    return pendingBytes > connection.handler.outputLimit
      || (pendingBytes > 0
        && group.pendingOutput.load(ordering: .relaxed) > limits.maxTotalPendingOutput)
  }

  /// Queues bytes for writing, counting them in the total.
  func queueOutput(_ bytes: [UInt8], on connection: LoopConnection) {
    connection.output.append(bytes)
    group.pendingOutput.add(bytes.count, ordering: .relaxed)
  }

  func flush(_ connection: LoopConnection) {
    assertInLoop()
    while connection.hasPendingOutput {
      let n = connection.output.write { first, second in
        ts_send_two(connection.fd, first.baseAddress, first.count, second.baseAddress, second.count)
      }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
        watchWritable(connection, true)
        return
      }
      if n <= 0 {
        closeConnection(connection)
        return
      }
      group.pendingOutput.subtract(n, ordering: .relaxed)
      connection.lastActivity = Self.now()
    }
    watchWritable(connection, false)
    if connection.closesAfterWrite {
      discardUnreadInput(connection)
      closeConnection(connection)
    } else if !connection.drainedNoticeQueued {
      connection.drainedNoticeQueued = true
      drainedNotices.append(connection)
    }
  }

  /// Before closing after a final answer (a 400, a `bad_frame`): closing a socket with unread
  /// input makes the kernel reset the connection, and a reset can destroy the answer in the
  /// client's receive buffer before the client reads it. So end our side first and throw away
  /// what the client had already sent (bounded; the socket is non-blocking).
  private func discardUnreadInput(_ connection: LoopConnection) {
    shutdown(connection.fd, Int32(SHUT_WR))
    var discarded = 0
    while discarded < 1 << 20 {
      let n = readBuffer.withUnsafeMutableBytes { read(connection.fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return }
      discarded += n
    }
  }

  private func watchWritable(_ connection: LoopConnection, _ on: Bool) {
    guard connection.watchingWritable != on else { return }
    connection.watchingWritable = on
    updateInterest(connection)
  }

  func updateInterest(_ connection: LoopConnection) {
    var events: UInt32 = UInt32(TS_READ_HANGUP)
    if !connection.readPaused { events |= UInt32(TS_READABLE) }
    if connection.watchingWritable { events |= UInt32(TS_WRITABLE) }
    _ = ts_poll_watch(poller, connection.fd, events, connection.id.value, 1)
  }

  func closeConnection(_ connection: LoopConnection) {
    assertInLoop()
    guard connections.removeValue(forKey: connection.id) != nil else { return }
    connection.isOpen = false
    connection.handler.closed(connection)
    group.pendingOutput.subtract(connection.pendingOutput, ordering: .relaxed)
    group.connections.subtract(1, ordering: .relaxed)
    connection.output.removeAll()
    _ = ts_poll_forget(poller, connection.fd)
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
