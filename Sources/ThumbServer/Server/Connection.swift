import ImagePipeline

/// One client connection's state, owned by the event loop thread alone.
final class Connection {
  let fd: Int32
  let token: UInt64
  var parser: HTTPRequestParser
  /// Bytes serialised but not yet written.
  var output: [UInt8] = []
  var outputOffset = 0
  /// Responses finished out of order, by request sequence number.
  var finished: [Int: (bytes: [UInt8], close: Bool)] = [:]
  var nextSequence = 0
  var nextToWrite = 0
  /// Requests being answered, by sequence number, so a hang-up can cancel them.
  var inFlight: [Int: Task<Void, Never>] = [:]
  /// Requests parsed but not started: held while the client has too much unread output or too
  /// many requests in flight, so pipelining cannot outrun what the client reads.
  var queued: [HTTPRequest] = []
  /// Set when the response being written must be the last (error, `Connection: close`).
  var closeAfterWrite = false
  /// Set once no more requests are read (after a parse error or a close).
  var stopReading = false
  var watchingWritable = false
  /// Set once the connection has switched to the session protocol.
  var session: Session?
  var readPaused = false
  /// Monotonic nanoseconds of the last byte read or written.
  var lastActivity: UInt64
  /// When the request head (or session frame) now being received started; the connection's
  /// accept time until its first request. Nil while no request is partly received.
  var partialSince: UInt64?

  init(fd: Int32, token: UInt64, limits: HTTPLimits, now: UInt64) {
    self.fd = fd
    self.token = token
    parser = HTTPRequestParser(limits: limits)
    lastActivity = now
    partialSince = now
  }

  var hasPendingOutput: Bool { outputOffset < output.count }

  /// Bytes serialised but not yet written.
  var pendingOutput: Int { output.count - outputOffset }

  /// Requests and session loads not yet answered.
  var pendingWork: Int { inFlight.count + queued.count + (session?.pendingWork ?? 0) }

  /// Nothing to answer, nothing to write, nothing half-received: closing it loses nothing.
  var isIdle: Bool {
    session == nil && inFlight.isEmpty && queued.isEmpty && finished.isEmpty && !hasPendingOutput
      && parser.bufferedBytes == 0
  }
}
