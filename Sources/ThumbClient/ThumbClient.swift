import CSystem
import Synchronization
@_exported import ThumbProtocol
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// A client for thumbd's session protocol (docs/PROTOCOL.md): bind slots to items and tokens,
/// load, cancel, prefetch and reprioritise over one connection, and receive results as
/// `events`. By default the client checks every result against the item and token the slot
/// holds when it arrives, as the server does before sending, so a result that crossed a newer
/// `load` on the wire is dropped (and counted) rather than shown.
public final class ThumbClient: Sendable {
  /// Where the daemon listens.
  public enum Endpoint: Sendable, Hashable {
    /// A Unix socket path.
    case unix(String)
    /// An IPv4 address and port.
    case tcp(host: String, port: UInt16)
  }

  /// How urgently a load is wanted (the protocol's `Priority`).
  public typealias Priority = ThumbProtocol.Priority

  /// A delivered thumbnail.
  public typealias Image = ServerMessage.Image

  /// What the daemon sent: the protocol's server messages, checked against the slots.
  public typealias Event = ServerMessage

  /// Why the client could not connect or send.
  public enum ClientError: Error, Sendable, Hashable {
    /// connect(2) failed with this errno.
    case connect(Int32)
    /// The daemon did not answer the upgrade with 101; its status line.
    case handshake(String)
    /// The connection is closed.
    case closed
    /// A frame's header line would be this many bytes, over the protocol's 16 KiB: the daemon
    /// would answer `bad_frame` and close. Nothing was sent; split the prefetch round.
    case frameTooLarge(Int)
  }

  /// Results as they arrive; the stream ends when the connection closes.
  public let events: AsyncStream<Event>
  private let fd: Int32
  private let verifyTokens: Bool
  private let writeLock = Mutex<Bool>(false)
  private let current = Mutex<[Int: SlotBinding]>([:])
  private let staleCount = Atomic<Int>(0)

  private struct SlotBinding: Hashable {
    let item: String
    let token: Int
    let rev: String?
  }

  /// Connects and performs the `GET /v1/session` upgrade (blocking). With `verifyTokens`
  /// false every result frame is passed on as received, for tools that check the server.
  /// `accepting` names the formats beyond JPEG and PNG this client can show (`webp`,
  /// `avif`): `auto` loads may come back in them.
  public init(
    endpoint: Endpoint, verifyTokens: Bool = true, maxImageBytes: Int = 64 << 20,
    accepting: [Format] = []
  ) throws(ClientError) {
    let fd: Int32
    switch endpoint {
    case .unix(let path): fd = ts_connect_unix(path)
    case .tcp(let host, let port): fd = ts_connect_tcp(host, port)
    }
    guard fd >= 0 else { throw .connect(-fd) }
    guard Self.sendAll(fd, Wire.upgradeRequest(accepting: accepting)) else {
      Glibc.close(fd)
      throw .closed
    }
    let leftover: [UInt8]
    do throws(ClientError) {
      leftover = try Self.readHandshake(fd)
    } catch {
      Glibc.close(fd)
      throw error
    }
    self.fd = fd
    self.verifyTokens = verifyTokens
    let (stream, continuation) = AsyncStream.makeStream(of: Event.self)
    events = stream
    let reader = SessionFrameReader(maxBodyBytes: maxImageBytes)
    SystemThread.detach(name: "thumbclient-rd") { [self] in
      readLoop(reader: reader, leftover: leftover, continuation: continuation)
    }
  }

  /// Results dropped because the slot had moved on to another item or token by the time they
  /// arrived.
  public var staleDropped: Int { staleCount.load(ordering: .relaxed) }

  /// Binds `slot` to `item` with `token` (and the content revision `rev`, when the caller's
  /// model knows one) and asks for its thumbnail; a previous load on the slot is superseded
  /// (the daemon drops its interest in it). `colour` is `srgb` or `keep` (nil: the daemon's
  /// default). With `preview`, a `.preview` event may come ahead of the image when the source
  /// carries an early picture (a JPEG's EXIF thumbnail or first DC scans, a HEIF's thumbnail).
  /// `options` are imgproxy's processing options, `/`-separated (`g:sm/rot:90`).
  public func load(
    slot: Int, item: String, token: Int, url: String, width: Int, height: Int, scale: Double = 1,
    fit: Fit = .contain, format: Format? = nil, quality: Int? = nil,
    priority: Priority = .visible, rev: String? = nil, colour: String? = nil,
    preview: Bool = false, options: String? = nil
  ) throws(ClientError) {
    current.withLock { $0[slot] = SlotBinding(item: item, token: token, rev: rev) }
    let box = ClientMessage.Box(
      width: width, height: height, scale: scale, fit: fit, format: format, quality: quality,
      colour: colour, options: options)
    try send(
      .load(
        ClientMessage.Load(
          slot: slot, item: item, token: token, url: url, box: box, priority: priority,
          rev: rev, preview: preview)))
  }

  /// Gives up the slot's load with `token`; its result will not be delivered.
  public func cancel(slot: Int, token: Int) throws(ClientError) {
    current.withLock { bindings in
      if bindings[slot]?.token == token { bindings[slot] = nil }
    }
    try send(.cancel(slot: slot, token: token))
  }

  /// Changes the priority of the slot's load with `token`.
  public func setPriority(slot: Int, token: Int, priority: Priority) throws(ClientError) {
    try send(.priority(slot: slot, token: token, priority: priority))
  }

  /// Asks for items that are about to be shown, at prefetch priority, as round `round`.
  public func prefetch(
    round: Int, items: [(item: String, url: String)], width: Int, height: Int, scale: Double = 1,
    fit: Fit = .contain, format: Format? = nil
  ) throws(ClientError) {
    try send(
      .prefetch(
        ClientMessage.Prefetch(
          round: round, items: items.map { ClientMessage.PrefetchItem(item: $0.item, url: $0.url) },
          box: ClientMessage.Box(
            width: width, height: height, scale: scale, fit: fit, format: format))))
  }

  /// Withdraws a prefetch round: work nobody else wants stops.
  public func release(round: Int) throws(ClientError) {
    try send(.release(round: round))
  }

  /// Sends bytes as they are (for protocol tests and tools).
  public func sendRaw(_ bytes: [UInt8]) throws(ClientError) {
    let sent = writeLock.withLock { closed in !closed && Self.sendAll(fd, bytes) }
    guard sent else { throw .closed }
  }

  /// Closes the connection; the daemon cancels this session's work. `events` ends.
  public func close() {
    writeLock.withLock { closed in
      guard !closed else { return }
      closed = true
      // The reader thread owns the descriptor and closes it when its read returns.
      shutdown(fd, Int32(SHUT_RDWR))
    }
  }

  deinit { close() }

  private func send(_ message: ClientMessage) throws(ClientError) {
    let bytes = message.frame.serialized()
    let headerLength = (bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count) + 1
    guard headerLength <= Wire.headerLimit else {
      throw .frameTooLarge(headerLength)
    }
    try sendRaw(bytes)
  }

  private func readLoop(
    reader: SessionFrameReader, leftover: [UInt8], continuation: AsyncStream<Event>.Continuation
  ) {
    var reader = reader
    var buffer = [UInt8](repeating: 0, count: 65536)
    var pending = leftover
    defer {
      continuation.finish()
      // Closed under the write lock, after marking the client closed: once the number is
      // free the kernel hands it to the next socket this process opens, and a later close()
      // or send on the stale number would hit that socket instead.
      writeLock.withLock { closed in
        closed = true
        Glibc.close(fd)
      }
    }
    while true {
      do {
        for frame in try reader.feed(pending) {
          if let event = event(from: frame) { continuation.yield(event) }
        }
      } catch {
        return
      }
      let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return }
      pending = Array(buffer[0..<n])
    }
  }

  /// The message a frame carries, if the slot it names still holds its item and token.
  private func event(from frame: SessionFrame) -> Event? {
    let message = ServerMessage(frame: frame)
    switch message {
    case .image(let image), .preview(let image):
      return holds(image.slot, image.item, image.token, rev: image.rev) ? message : nil
    case .error(let slot?, let item?, let token?, _, _):
      return holds(slot, item, token, rev: nil, comparingRev: false) ? message : nil
    case .placeholder(let placeholder):
      return holds(placeholder.slot, placeholder.item, placeholder.token, rev: placeholder.rev)
        ? message : nil
    default:
      return message
    }
  }

  /// Whether `slot` still holds `item` with `token`. Results in `events` were checked when
  /// they arrived; a UI that consumes them on another thread calls this again right before
  /// showing one, on the thread that also calls `load`, so a result can never land in a slot
  /// that moved on in between. A false answer counts as a stale drop.
  public func isCurrent(slot: Int, item: String, token: Int) -> Bool {
    holds(slot, item, token, rev: nil, comparingRev: false)
  }

  /// Whether `slot` still holds `item`, `token` and (for an image, which echoes it) `rev`.
  private func holds(
    _ slot: Int, _ item: String, _ token: Int, rev: String?, comparingRev: Bool = true
  ) -> Bool {
    guard verifyTokens else { return true }
    let binding = current.withLock { $0[slot] }
    if let binding, binding.item == item, binding.token == token,
      !comparingRev || binding.rev == rev
    {
      return true
    }
    staleCount.add(1, ordering: .relaxed)
    return false
  }

  private static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
      let n = bytes.withUnsafeBytes {
        Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
      }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return false }
      offset += n
    }
    return true
  }

  /// Reads the 101 response head; returns the bytes after it (the first frames, if any).
  private static func readHandshake(_ fd: Int32) throws(ClientError) -> [UInt8] {
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    let terminator: [UInt8] = [13, 10, 13, 10]
    while true {
      if let end = received.firstRange(of: terminator) {
        let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
        let statusLine = head.split(separator: "\r\n").first.map(String.init) ?? ""
        guard statusLine.hasPrefix("HTTP/1.1 101") else { throw .handshake(statusLine) }
        return Array(received[end.upperBound...])
      }
      guard received.count < 16384 else { throw .handshake("response head too long") }
      let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { throw .closed }
      received += chunk[0..<n]
    }
  }

}

extension ThumbClient.ClientError: CustomStringConvertible {
  /// A sentence for a tool's error line (never the case's name).
  public var description: String {
    switch self {
    case .connect(let code):
      "cannot connect to the daemon: \(String(cString: strerror(code)))"
    case .handshake(let statusLine):
      "the daemon did not accept the session upgrade (it answered \(statusLine))"
    case .closed: "the connection to the daemon is closed"
    case .frameTooLarge(let bytes):
      "a frame header of \(bytes) bytes is over the protocol's limit of "
        + "\(SessionFrameReader.headerLimit) bytes; nothing was sent"
    }
  }
}
