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
  /// Set when the response being written must be the last (error, `Connection: close`).
  var closeAfterWrite = false
  /// Set once no more requests are read (after a parse error or a close).
  var stopReading = false
  var watchingWritable = false
  /// Set once the connection has switched to the session protocol.
  var session: Session?
  var readPaused = false

  init(fd: Int32, token: UInt64, limits: HTTPLimits) {
    self.fd = fd
    self.token = token
    parser = HTTPRequestParser(limits: limits)
  }

  var hasPendingOutput: Bool { outputOffset < output.count }

  /// Requests and session loads not yet answered.
  var pendingWork: Int { inFlight.count + (session?.pendingWork ?? 0) }
}
