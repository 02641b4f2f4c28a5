import CSystem
import Foundation
import Synchronization
import ThumbClient

#if canImport(Glibc)
  import Glibc
#endif

/// thumbd over its Unix socket: each client is one `ThumbClient` session.
public struct DaemonTarget: LoadTarget {
  /// The daemon's socket.
  public let socket: String

  /// A target for the daemon listening on `socket`.
  public init(socket: String) { self.socket = socket }

  /// `daemon:PATH`.
  public var name: String { "daemon:\(socket)" }

  /// Opens a session.
  public func connect() throws -> any LoadClient {
    try SessionClient(client: ThumbClient(endpoint: .unix(socket)))
  }

  /// Reads `/metrics`.
  public func serverFigures() -> ServerFigures {
    var figures = ServerFigures()
    let text = Self.get(socket: socket, "/metrics")
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
      let parts = line.split(separator: " ")
      guard parts.count == 2, let value = Double(parts[1]) else { continue }
      switch parts[0] {
      case "thumbd_cancelled_work_total": figures.cancelledWork = Int(value)
      case "thumbd_stale_drops_total": figures.staleDrops = Int(value)
      case "thumbd_decodes_total": figures.decodes = Int(value)
      case "thumbd_process_resident_memory_bytes": figures.residentBytes = Int(value)
      default: break
      }
    }
    return figures
  }

  /// A blocking GET over the socket; the body, or "" on failure.
  static func get(socket: String, _ target: String) -> String {
    let fd = ts_connect_unix(socket)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    guard case .reply(let reply) = HTTPLoadClient.exchange(fd: fd, target: target, client: nil)
    else { return "" }
    return String(decoding: reply.body, as: UTF8.self)
  }
}

/// A `ThumbClient` session as a `LoadClient`.
final class SessionClient: LoadClient {
  let client: ThumbClient
  let events: AsyncStream<TargetEvent>
  /// A session frame's header line may hold `Wire.headerLimit` bytes: a large round is sent as
  /// up to this many protocol rounds (`round * chunkRounds + n`).
  static let chunkRounds = 64
  /// Protocol rounds per round, for release.
  private let chunks = Mutex<[Int: Int]>([:])

  init(client: ThumbClient) {
    self.client = client
    let (stream, continuation) = AsyncStream.makeStream(of: TargetEvent.self)
    events = stream
    let source = client.events
    Task {
      for await event in source {
        continuation.yield(TargetEvent(event, roundDivisor: Self.chunkRounds))
      }
      continuation.finish()
    }
  }

  func load(
    slot: Int, item: String, token: Int, url: String, size: Int, visible: Bool, preview: Bool
  ) throws {
    try client.load(
      slot: slot, item: item, token: token, url: url, width: size, height: size,
      priority: visible ? .visible : .normal, preview: preview)
  }

  func cancel(slot: Int, token: Int) throws { try client.cancel(slot: slot, token: token) }

  func prefetch(round: Int, items: [(item: String, url: String)], size: Int) throws {
    // Sent whole if its frame fits; a batch whose frame the client refuses as too large is
    // split in two, so the sizes are the encoder's own, not a guess.
    var batches = [items[...]]
    var index = 0
    // Recorded even when a batch fails, so release withdraws what was sent.
    defer { chunks.withLock { $0[round] = index } }
    while index < batches.count {
      guard index < Self.chunkRounds else {
        throw HarnessError.setup("a prefetch round of \(items.count) items is too large")
      }
      let batch = batches[index]
      let sent = Result { () throws(ThumbClient.ClientError) in
        try client.prefetch(
          round: round * Self.chunkRounds + index, items: Array(batch), width: size, height: size)
      }
      switch sent {
      case .success: index += 1
      case .failure(.frameTooLarge) where batch.count > 1:
        let middle = batch.startIndex + batch.count / 2
        batches.replaceSubrange(index...index, with: [batch[..<middle], batch[middle...]])
      case .failure(let error): throw error
      }
    }
  }

  func release(round: Int) throws {
    let count = chunks.withLock { $0.removeValue(forKey: round) } ?? 1
    for index in 0..<count { try client.release(round: round * Self.chunkRounds + index) }
  }

  func isCurrent(slot: Int, item: String, token: Int) -> Bool {
    client.isCurrent(slot: slot, item: item, token: token)
  }

  var staleDropped: Int { client.staleDropped }

  func close() { client.close() }
}
