/// One protocol's side of a connection: what to do with the bytes that arrive, and what the
/// event loop must know to time the connection out or close it for room. The loop knows bytes
/// and connections only; the HTTP handler and the session handler know their protocols. A
/// handler lives on the loop thread (`EventLoop.assertInLoop`); replies from other threads
/// come back through `EventLoop.execute`.
protocol ConnectionHandler: AnyObject {
  /// Bytes arrived on `connection`. Returns whether they completed a request or frame (the
  /// head timeout's clock then starts again for what follows).
  @discardableResult
  func received(_ bytes: ArraySlice<UInt8>, on connection: LoopConnection) -> Bool
  /// Every byte written so far has gone out: a handler that stopped taking work while its
  /// client was not reading may take more.
  func drained(_ connection: LoopConnection)
  /// The connection is gone (hang-up, timeout, error, or the close after a final answer):
  /// give up its work.
  func closed(_ connection: LoopConnection)
  /// A request head or frame is due: part of one is buffered, or (HTTP) the first request
  /// has not come yet. The head timeout's clock runs.
  var hasPartialInput: Bool { get }
  /// Nothing in flight, queued or half-received: closing it loses nothing. Sessions never are.
  var isIdle: Bool { get }
  /// Requests and loads not answered yet, for the drain at shutdown.
  var pendingWork: Int { get }
  /// Unwritten bytes past which the handler stops taking work from its client.
  var outputLimit: Int { get }
  /// The loop has read everything that was ready in this pass, by `readBy`: work the
  /// handler deferred with `EventLoop.deferUntilRead` starts now.
  func readPassEnded(_ connection: LoopConnection, readBy: ContinuousClock.Instant)
}

extension ConnectionHandler {
  /// Handlers that defer nothing.
  func readPassEnded(_ connection: LoopConnection, readBy: ContinuousClock.Instant) {}
}
