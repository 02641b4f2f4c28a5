import Foundation
import ImagePipeline
import Synchronization
import ThumbProtocol
import ThumbServer

/// The ImagePipeline library in this process, driven by the daemon's own session rules: each
/// client is a `SessionDriver` (the `SessionState` the daemon's sessions run) over the
/// pipeline, called directly instead of through frames on a socket. What differs from the
/// daemon target is the transport, never the delivery decisions.
public final class LibraryTarget: LoadTarget {
  /// The pipeline under test.
  public let pipeline: ThumbnailPipeline

  /// A pipeline that may fetch from loopback origins, with a memory cache of `memoryLimit`.
  public init(memoryLimit: Int = 64 << 20) {
    pipeline = Self.loopbackPipeline(memoryLimit: memoryLimit)
  }

  /// Drives `pipeline` (configured by the caller: another loader, other caches).
  public init(pipeline: ThumbnailPipeline) {
    self.pipeline = pipeline
  }

  /// An in-process pipeline for thumbload's origins on loopback.
  static func loopbackPipeline(memoryLimit: Int) -> ThumbnailPipeline {
    let policy = SourcePolicy(allowedNetworks: IPNetwork.loopback)
    return ThumbnailPipeline(
      configuration: .init(
        dataLoader: SourceLoader(policy: policy), memoryCacheCostLimit: memoryLimit))
  }

  /// `library`.
  public var name: String { "library" }

  private let clients = Atomic<UInt64>(0)

  /// A client with its own session (slot table, rounds) and its own share of prefetch
  /// capacity.
  public func connect() throws -> any LoadClient {
    let client = ClientID(clients.add(1, ordering: .relaxed).newValue)
    let pipeline = pipeline
    return LibraryClient { report in
      // Each client's own bound on its announced items: SessionMemory is used from one
      // serial context, and here each client is one (its lock).
      SessionDriver(
        pipeline: pipeline, client: client, parameters: ThumbnailParameters(),
        memory: SessionMemory(), report: report)
    }
  }

  /// The pipeline's counters and this process's RSS.
  public func serverFigures() -> ServerFigures { Self.figures(of: pipeline) }

  /// An in-process pipeline's counters and this process's RSS.
  static func figures(of pipeline: ThumbnailPipeline) -> ServerFigures {
    let snapshot = pipeline.metrics.snapshot()
    var figures = ServerFigures()
    figures.cancelledWork = snapshot.cancelledWork
    figures.staleDrops = snapshot.staleDrops
    figures.decodes = snapshot.decodes
    figures.residentBytes = ResidentMemory.ofThisProcess()
    return figures
  }
}

/// One client's session over an in-process pipeline: the `LoadClient` operations become
/// `ClientMessage`s for the client's `SessionDriver`, and its messages become events. A lock
/// is the session's serial context, as the event loop is the daemon's.
final class LibraryClient: LoadClient {
  let events: AsyncStream<TargetEvent>
  private let continuation: AsyncStream<TargetEvent>.Continuation
  private let session: Mutex<SessionDriver?>
  /// What each slot shows, as the client sees it (its display-time check).
  private let shown = Mutex<[Int: ShownItem]>([:])
  private let stale = Atomic<Int>(0)

  private struct ShownItem: Hashable {
    let item: String
    let token: Int
  }

  /// Carries finished work back to the client, which does not exist yet when its driver is
  /// made.
  private final class Relay: @unchecked Sendable {
    // @unchecked: set once in init, before any work can start.
    weak var client: LibraryClient?
  }

  /// A client whose session `makeDriver` builds around the report callback it is given.
  init(makeDriver: (@escaping @Sendable (FinishedWork) -> Void) -> SessionDriver) {
    (events, continuation) = AsyncStream.makeStream(of: TargetEvent.self)
    let relay = Relay()
    session = Mutex(makeDriver { done in relay.client?.finished(done) })
    relay.client = self
  }

  func load(
    slot: Int, item: String, token: Int, url: String, size: Int, visible: Bool, preview: Bool
  ) throws {
    shown.withLock { $0[slot] = ShownItem(item: item, token: token) }
    apply(
      .load(
        .init(
          slot: slot, item: item, token: token, url: url,
          box: .init(width: size, height: size), priority: visible ? .visible : .normal,
          preview: preview)))
  }

  func cancel(slot: Int, token: Int) throws {
    shown.withLock { if $0[slot]?.token == token { $0[slot] = nil } }
    apply(.cancel(slot: slot, token: token))
  }

  func prefetch(round: Int, items: [(item: String, url: String)], size: Int) throws {
    apply(
      .prefetch(
        .init(
          round: round, items: items.map { .init(item: $0.item, url: $0.url) },
          box: .init(width: size, height: size))))
  }

  func release(round: Int) throws { apply(.release(round: round)) }

  func isCurrent(slot: Int, item: String, token: Int) -> Bool {
    let current = shown.withLock { $0[slot] == ShownItem(item: item, token: token) }
    if !current { stale.add(1, ordering: .relaxed) }
    return current
  }

  var staleDropped: Int { stale.load(ordering: .relaxed) }

  func close() {
    session.withLock { driver in
      driver?.close()
      driver = nil
    }
    continuation.finish()
  }

  private func apply(_ message: ClientMessage) {
    session.withLock { driver in
      for message in driver?.apply(message) ?? [] {
        continuation.yield(TargetEvent(message))
      }
    }
  }

  private func finished(_ done: FinishedWork) {
    // Checked and yielded under the session's lock, as the daemon checks and writes on its
    // loop: no newer load can come between the check and the event.
    session.withLock { driver in
      for message in driver?.finished(done) ?? [] { continuation.yield(TargetEvent(message)) }
    }
  }
}

/// Resident set size from /proc.
enum ResidentMemory {
  static func ofThisProcess() -> Int { of(path: "/proc/self/status") }

  static func of(path: String) -> Int {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    let kib = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    return kib * 1024
  }
}
