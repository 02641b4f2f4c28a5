import ImagePipeline
import ThumbClient

/// What a target delivers to one simulated client.
public enum TargetEvent: Sendable, Hashable {
  /// A thumbnail for a slot's load.
  case image(slot: Int, item: String, token: Int, cache: String, data: [UInt8])
  /// A load failed.
  case error(slot: Int?, item: String?, token: Int?, code: String)
  /// A prefetched item is cached.
  case prefetched(round: Int, item: String)
  /// A prefetched item failed.
  case prefetchError(round: Int, item: String, code: String)
  /// A slot's load's placeholder, before its image.
  case placeholder(slot: Int, item: String, token: Int)
  /// A slot's load's preview (an early picture), before its image.
  case preview(slot: Int, item: String, token: Int, data: [UInt8])
}

extension TargetEvent {
  /// The event a session message gives a client (a `bad_frame` error, and a `bad_message` for a
  /// message that named no valid slot, are an `.error` with no slot).
  public init(_ message: ServerMessage, roundDivisor: Int = 1) {
    switch message {
    case .image(let image):
      self = .image(
        slot: image.slot, item: image.item, token: image.token, cache: image.cache,
        data: image.data)
    case .error(let slot, let item, let token, let code, _):
      self = .error(slot: slot, item: item, token: token, code: code)
    case .prefetched(let round, let item):
      self = .prefetched(round: round / roundDivisor, item: item)
    case .prefetchError(let round, let item, let code):
      self = .prefetchError(round: round / roundDivisor, item: item, code: code)
    case .placeholder(let placeholder):
      self = .placeholder(slot: placeholder.slot, item: placeholder.item, token: placeholder.token)
    case .preview(let preview):
      self = .preview(
        slot: preview.slot, item: preview.item, token: preview.token, data: preview.data)
    }
  }
}

/// One simulated client's connection to the system under test: the session protocol's
/// operations, plus the target's own display-time check.
public protocol LoadClient: AnyObject, Sendable {
  /// Results as they arrive.
  var events: AsyncStream<TargetEvent> { get }
  /// Binds `slot` to `item` with `token` and asks for the thumbnail (a square box of `size`),
  /// and with `preview` for a preview first where the target offers them.
  func load(
    slot: Int, item: String, token: Int, url: String, size: Int, visible: Bool, preview: Bool
  ) throws
  /// Gives up the slot's load with `token`.
  func cancel(slot: Int, token: Int) throws
  /// Announces items about to be shown, as round `round`.
  func prefetch(round: Int, items: [(item: String, url: String)], size: Int) throws
  /// Withdraws round `round`.
  func release(round: Int) throws
  /// The target's check right before a result is shown: does the slot still hold it?
  func isCurrent(slot: Int, item: String, token: Int) -> Bool
  /// Results the target's client side dropped as stale.
  var staleDropped: Int { get }
  /// Ends the client; its work is given up.
  func close()
}

/// Server-side figures, read after (or during) a run.
public struct ServerFigures: Sendable, Hashable {
  /// Work stopped because every subscriber left (cancellations that stopped real work).
  public var cancelledWork = 0
  /// Results the server dropped because the slot had moved on.
  public var staleDrops = 0
  /// Decodes started.
  public var decodes = 0
  /// Resident memory of the serving process, bytes.
  public var residentBytes = 0

  /// Zero figures.
  public init() {}
}

/// A system under test: the daemon over its socket, or the library in this process.
public protocol LoadTarget: Sendable {
  /// For reports: `daemon:/path.sock` or `library`.
  var name: String { get }
  /// Opens one simulated client.
  func connect() throws -> any LoadClient
  /// The server's counters now.
  func serverFigures() -> ServerFigures
}
