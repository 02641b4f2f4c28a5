/// Numbers a connection in the event loop (its epoll registration). Not the session
/// protocol's tokens, which belong to clients.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
  let value: UInt64

  /// The number, for logs.
  public var description: String { String(value) }
}

/// One client connection as the event loop sees it: a descriptor, unwritten output, whether
/// it is read, and the handler of its protocol. Loop-thread state only.
final class LoopConnection: @unchecked Sendable {
  // @unchecked: touched only on the loop thread (checked by EventLoop.assertInLoop in debug
  // builds); other threads reach it through EventLoop.execute.
  let id: ConnectionID
  let fd: Int32
  unowned let loop: EventLoop
  var handler: any ConnectionHandler
  /// Bytes serialised but not yet written.
  var output = OutputQueue()
  /// Set when what is queued now is the last output: close once it is written.
  private(set) var closesAfterWrite = false
  /// No more input is read (after a final answer); a hang-up then closes at once.
  private(set) var stopsReading = false
  /// Reading waits while the handler cannot take more work.
  private(set) var readPaused = false
  var watchingWritable = false
  /// The loop owes the handler a `drained` call (`EventLoop.deliverDrainedNotices`).
  var drainedNoticeQueued = false
  var isOpen = true
  /// Monotonic nanoseconds of the last byte read or written.
  var lastActivity: UInt64
  /// When the partial input now buffered started arriving (the accept time until the first
  /// request); nil while nothing is half-received.
  var partialSince: UInt64?
  /// While the loop reads a connection its poller reported readable: when the poll returned.
  /// The first byte of the first request those reads complete was in the socket by then (the
  /// poll saw it, or it was read earlier), so its client sent it before that instant, and a
  /// check of its source made after it is fresh for it. Only the first request: the bytes of
  /// another behind it may have come later. See `takeArrivalBound`.
  var arrivalBound: ContinuousClock.Instant?

  init(id: ConnectionID, fd: Int32, loop: EventLoop, handler: any ConnectionHandler, now: UInt64) {
    self.id = id
    self.fd = fd
    self.loop = loop
    self.handler = handler
    lastActivity = now
    partialSince = now
  }

  var hasPendingOutput: Bool { !output.isEmpty }

  /// `arrivalBound` for the request just completed, once: nil for every later one.
  func takeArrivalBound() -> ContinuousClock.Instant? {
    defer { arrivalBound = nil }
    return arrivalBound
  }

  /// Bytes serialised but not yet written.
  var pendingOutput: Int { output.count }

  /// Queues bytes after everything queued before and starts writing them; `more` follows
  /// `bytes` without being copied next to them (a response's body after its head).
  func write(_ bytes: [UInt8], _ more: [UInt8] = []) {
    guard isOpen, !bytes.isEmpty || !more.isEmpty else { return }
    loop.queueOutput(bytes, on: self)
    loop.queueOutput(more, on: self)
    loop.flush(self)
  }

  /// Closes the connection once everything queued so far is written; nothing more is read.
  func closeAfterWrite() {
    closesAfterWrite = true
    stopsReading = true
    if isOpen && !hasPendingOutput { loop.flush(self) }
  }

  /// Reads no more input; the connection stays open until written out or hung up.
  func stopReading() { stopsReading = true }

  /// Whether unwritten output is over the handler's limit or the loop's total.
  var isOverOutputBound: Bool { loop.isOverOutputBound(self) }

  /// Stops reading until `resumeReading`.
  func pauseReading() {
    guard !readPaused else { return }
    readPaused = true
    loop.updateInterest(self)
  }

  /// Reads again, starting with what arrived meanwhile.
  func resumeReading() {
    guard readPaused else { return }
    readPaused = false
    loop.updateInterest(self)
    loop.readAvailable(self)
  }

  /// Hands the connection to another protocol's handler (an upgrade), with the bytes that
  /// arrived after the upgrade request.
  func switchHandler(to next: any ConnectionHandler, leftover: [UInt8]) {
    handler = next
    if !leftover.isEmpty { next.received(leftover[...], on: self) }
  }

  /// Closes now.
  func close() { loop.closeConnection(self) }
}
