import Foundation
import Loopback
import Synchronization
import ThumbClient
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// thumbd over its Unix socket as one-shot HTTP clients (`GET /v1/thumbnail`), as a web page
/// or an app without the session protocol uses it. HTTP has no slots, tokens or rounds, so the
/// client keeps them: each load is a request on a connection of its own (kept alive and reused
/// afterwards), a recycled cell closes its request's connection (the only way HTTP can give
/// work up), and a prefetch is a request with `priority=prefetch`, at most six at a time per
/// client, as a browser does per host.
public final class HTTPTarget: LoadTarget {
  /// The daemon's socket.
  public let socket: String

  /// A target for the daemon listening on `socket`.
  public init(socket: String) { self.socket = socket }

  /// `http:PATH`.
  public var name: String { "http:\(socket)" }

  private let clients = Atomic<UInt64>(0)

  /// A client with its own connections and slot table, naming itself in `X-Thumbd-Client`.
  public func connect() throws -> any LoadClient {
    HTTPLoadClient(
      socket: socket,
      name: "thumbload-\(getpid())-\(clients.add(1, ordering: .relaxed).newValue)")
  }

  /// Reads `/metrics`.
  public func serverFigures() -> ServerFigures { DaemonTarget(socket: socket).serverFigures() }
}

/// One request in flight; closing its connection is how it is given up.
final class HTTPExchange: Sendable {
  private struct State {
    var fd: Int32?
    var abandoned = false
  }
  private let state = Mutex(State())

  /// Uses `fd` for this exchange; false (and `fd` is the caller's to close) if it was already
  /// abandoned.
  func attach(_ fd: Int32) -> Bool {
    state.withLock { state in
      guard !state.abandoned else { return false }
      state.fd = fd
      return true
    }
  }

  /// Ends the exchange normally; false if it was abandoned meanwhile (the connection was shut).
  func detach() -> Bool {
    state.withLock { state in
      state.fd = nil
      return !state.abandoned
    }
  }

  /// Gives the request up: its connection is shut down, so the blocked read returns and the
  /// server sees the client leave.
  func abandon() {
    state.withLock { state in
      state.abandoned = true
      if let fd = state.fd { shutdown(fd, Int32(SHUT_RDWR)) }
    }
  }
}

/// A parsed HTTP response.
typealias HTTPReply = HTTPRoundTrip.Reply

final class HTTPLoadClient: LoadClient {
  private struct Binding {
    let item: String
    let token: Int
    let exchange: HTTPExchange?
  }

  private struct PendingPrefetch {
    let round: Int
    let item: String
    let target: String
  }

  private struct State {
    var slots: [Int: Binding] = [:]
    var rounds: [Int: [HTTPExchange]] = [:]
    var pending: [PendingPrefetch] = []
    var prefetchesRunning = 0
    var idle: [Int32] = []
    var closed = false
  }

  /// Prefetch requests at once per client.
  static let prefetchConnections = 6

  let events: AsyncStream<TargetEvent>
  private let continuation: AsyncStream<TargetEvent>.Continuation
  private let socket: String
  /// Sent as `X-Thumbd-Client`, so the daemon treats this client's requests as one client's.
  private let name: String
  private let state = Mutex(State())
  private let stale = Atomic<Int>(0)

  init(socket: String, name: String) {
    self.socket = socket
    self.name = name
    (events, continuation) = AsyncStream.makeStream(of: TargetEvent.self)
  }

  static func target(url: String, size: Int, priority: String) -> String {
    let encoded = PercentEncoding.encode(url)
    return "/v1/thumbnail?url=\(encoded)&w=\(size)&h=\(size)&priority=\(priority)"
  }

  func load(
    slot: Int, item: String, token: Int, url: String, size: Int, visible: Bool, preview: Bool
  ) throws {
    let exchange = HTTPExchange()
    let previous = state.withLock { state -> HTTPExchange? in
      let old = state.slots[slot]?.exchange
      state.slots[slot] = Binding(item: item, token: token, exchange: exchange)
      return old
    }
    previous?.abandon()
    let target = Self.target(url: url, size: size, priority: visible ? "visible" : "normal")
    Thread.detachNewThread { [self] in
      guard let reply = perform(target, exchange) else { return }
      // Deliver only if the cell still holds this load, as the session server does.
      let current = state.withLock { $0.slots[slot]?.token == token && !$0.closed }
      guard current else {
        stale.add(1, ordering: .relaxed)
        return
      }
      state.withLock { state in
        if state.slots[slot]?.token == token {
          state.slots[slot] = Binding(item: item, token: token, exchange: nil)
        }
      }
      if reply.status == 200 {
        continuation.yield(
          .image(
            slot: slot, item: item, token: token, cache: reply.headers["x-thumbd-cache"] ?? "miss",
            data: reply.body))
      } else {
        continuation.yield(.error(slot: slot, item: item, token: token, code: Self.code(reply)))
      }
    }
  }

  func cancel(slot: Int, token: Int) throws {
    let exchange = state.withLock { state -> HTTPExchange? in
      guard let binding = state.slots[slot], binding.token == token else { return nil }
      state.slots[slot] = nil
      return binding.exchange
    }
    exchange?.abandon()
  }

  func prefetch(round: Int, items: [(item: String, url: String)], size: Int) throws {
    state.withLock { state in
      for entry in items {
        state.pending.append(
          PendingPrefetch(
            round: round, item: entry.item,
            target: Self.target(url: entry.url, size: size, priority: "prefetch")))
      }
    }
    startPrefetches()
  }

  func release(round: Int) throws {
    let exchanges = state.withLock { state -> [HTTPExchange] in
      state.pending.removeAll { $0.round == round }
      return state.rounds.removeValue(forKey: round) ?? []
    }
    for exchange in exchanges { exchange.abandon() }
  }

  /// Starts queued prefetches while fewer than `prefetchConnections` run.
  private func startPrefetches() {
    while let (next, exchange) = state.withLock({ state -> (PendingPrefetch, HTTPExchange)? in
      guard !state.closed, state.prefetchesRunning < Self.prefetchConnections,
        !state.pending.isEmpty
      else { return nil }
      let next = state.pending.removeFirst()
      let exchange = HTTPExchange()
      state.rounds[next.round, default: []].append(exchange)
      state.prefetchesRunning += 1
      return (next, exchange)
    }) {
      Thread.detachNewThread { [self] in
        let reply = perform(next.target, exchange)
        state.withLock { state in
          state.prefetchesRunning -= 1
          state.rounds[next.round]?.removeAll { $0 === exchange }
          if state.rounds[next.round]?.isEmpty == true { state.rounds[next.round] = nil }
        }
        if let reply {
          continuation.yield(
            reply.status == 200
              ? .prefetched(round: next.round, item: next.item)
              : .prefetchError(round: next.round, item: next.item, code: Self.code(reply)))
        }
        startPrefetches()
      }
    }
  }

  func isCurrent(slot: Int, item: String, token: Int) -> Bool {
    state.withLock { state in
      guard let binding = state.slots[slot] else { return false }
      return binding.item == item && binding.token == token
    }
  }

  var staleDropped: Int { stale.load(ordering: .relaxed) }

  func close() {
    let (exchanges, idle) = state.withLock { state -> ([HTTPExchange], [Int32]) in
      state.closed = true
      state.pending.removeAll()
      let exchanges =
        state.slots.values.compactMap(\.exchange) + state.rounds.values.flatMap { $0 }
      state.slots.removeAll()
      state.rounds.removeAll()
      defer { state.idle.removeAll() }
      return (exchanges, state.idle)
    }
    for exchange in exchanges { exchange.abandon() }
    for fd in idle { Glibc.close(fd) }
    continuation.finish()
  }

  /// The error kind from a JSON error body, or `http_STATUS`.
  static func code(_ reply: HTTPReply) -> String {
    if case .object(let fields) = JSONValue.parse(reply.body),
      case .string(let kind) = fields["error"]
    {
      return kind
    }
    return "http_\(reply.status)"
  }

  /// Sends `target` and reads the reply on an idle kept-alive connection or a new one; nil
  /// when the exchange was abandoned or the connection failed. A kept-alive connection the
  /// server closed meanwhile is retried once on a new one.
  private func perform(_ target: String, _ exchange: HTTPExchange) -> HTTPReply? {
    for attempt in 0..<2 {
      let reused = attempt == 0 ? state.withLock { $0.idle.popLast() } : nil
      let fd = reused ?? SocketClient.connect(socket)
      guard fd >= 0 else { return nil }
      guard exchange.attach(fd) else {
        Glibc.close(fd)
        return nil
      }
      let outcome = Self.exchange(fd: fd, target: target, client: name)
      guard exchange.detach() else {
        Glibc.close(fd)
        return nil
      }
      switch outcome {
      case .reply(let reply):
        let kept =
          reply.keepAlive
          && state.withLock { state in
            guard !state.closed, state.idle.count < 64 else { return false }
            state.idle.append(fd)
            return true
          }
        if !kept { Glibc.close(fd) }
        return reply
      case .closedBeforeReply where reused != nil:
        Glibc.close(fd)
        continue
      case .closedBeforeReply, .failed:
        Glibc.close(fd)
        return nil
      }
    }
    return nil
  }

  /// One GET and its response on `fd`, blocking; `client` names the client when given.
  static func exchange(fd: Int32, target: String, client: String?) -> HTTPRoundTrip.Outcome {
    HTTPRoundTrip.get(
      fd: fd, target: target, headers: client.map { [("X-Thumbd-Client", $0)] } ?? [])
  }
}
