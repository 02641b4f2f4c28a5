import Foundation
import Loopback
import Synchronization
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// How the synthetic origin behaves.
public struct OriginBehaviour: Sendable, Hashable {
  /// Milliseconds before the response starts.
  public var latencyMs: Double = 20
  /// Up to this many milliseconds more, uniformly drawn per request.
  public var jitterMs: Double = 30
  /// Body bytes per second per response; 0 is unlimited.
  public var bandwidth: Int = 0
  /// Share of requests that fail, split evenly between a 503, a connection reset before the
  /// body, and a body cut short.
  public var errorRate: Double = 0
  /// Source image width.
  public var width = 800
  /// Source image height.
  public var height = 600
  /// PNG sources instead of JPEG.
  public var png = false
  /// Progressive JPEG sources (DC scans first, as web images often are) instead of baseline.
  public var progressive = false
  /// `Cache-Control: max-age` the origin sends, with an `ETag` per item and revision (and a
  /// 304 for a matching `If-None-Match`); nil sends neither. Set whenever items change.
  public var maxAge: Int?

  /// Defaults: 20-50 ms latency, unlimited bandwidth, no errors, 800x600 JPEG.
  public init() {}
}

/// The harness's images served by a `LoopbackOrigin` on 127.0.0.1, at `/item/N.jpg` (or
/// `.png`): each image encodes its item number and revision (`ItemImage`); with `Mutations`,
/// items change as the run goes on. The origin counts every request and the body bytes it sent
/// per path, which is how the harness knows origin fetches and wasted bytes.
public final class SyntheticOrigin: ImageOrigin, Sendable {
  /// The port it listens on.
  public var port: UInt16 { server.port }
  private let behaviour: OriginBehaviour
  private let server: LoopbackOrigin
  private let images = Mutex<(bytes: [Int: [UInt8]], total: Int, order: [Int])>(([:], 0, []))
  private let filler: [UInt8]?
  private let randomState: Mutex<SeededRandom>
  /// When items change, if they do.
  public let mutations: Mutations?
  private let conditionalCount = Atomic<Int>(0)
  private let notModifiedCount = Atomic<Int>(0)

  /// Binds a loopback port (0 picks one); items change as `mutations` says.
  public init(
    behaviour: OriginBehaviour, port: UInt16 = 0, seed: UInt64 = 1, mutations: Mutations? = nil
  ) throws {
    var behaviour = behaviour
    if mutations != nil && behaviour.maxAge == nil { behaviour.maxAge = 1 }
    self.behaviour = behaviour
    self.mutations = mutations
    filler = try? ItemImage.encoded(
      item: ItemImage.maxItem, width: behaviour.width, height: behaviour.height, png: behaviour.png,
      progressive: behaviour.progressive)
    randomState = Mutex(SeededRandom(seed: seed))
    // The answer is made by a handler that needs `self`, which is only whole after the
    // server exists: the box is filled right after.
    let answer = Mutex<(@Sendable (LoopbackOrigin.Request) -> LoopbackOrigin.Response)?>(nil)
    do {
      server = try LoopbackOrigin(port: port, sending: .fast, keepsOrder: false) { request in
        answer.withLock { $0 }?(request) ?? Self.unavailable
      }
    } catch {
      throw HarnessError.setup("origin cannot listen: \(error)")
    }
    answer.withLock {
      $0 = { [weak self] in
        self?.respond(to: $0) ?? Self.unavailable
      }
    }
    server.start()
  }

  /// The answer while the origin is being set up or torn down.
  private static var unavailable: LoopbackOrigin.Response {
    var response = LoopbackOrigin.Response(status: 503)
    response.close = true
    return response
  }

  /// The URL of item `n`.
  public func url(item: Int) -> String {
    server.url("/item/\(item).\(behaviour.png ? "png" : "jpg")")
  }

  /// Requests per path so far.
  public var requests: [String: Int]? { server.requestCounts }

  /// Body bytes sent per path so far.
  public var bytesSent: [String: Int]? { server.liveBytes }

  /// The `max-age` sent with every image, if any.
  public var maxAge: Int? { behaviour.maxAge }

  /// The last few image bodies sent per path, first byte to last.
  public var transfers: [String: [OriginTransfer]]? { server.transfers }

  /// Conditional requests received, and how many were answered 304.
  public var revalidations: (asked: Int, notModified: Int) {
    (conditionalCount.load(ordering: .relaxed), notModifiedCount.load(ordering: .relaxed))
  }

  /// Stops accepting.
  public func stop() { server.stop() }

  /// Waits until every connection has ended and its bytes are counted (see
  /// `LoopbackOrigin.waitUntilIdle`).
  public func waitUntilIdle(seconds: Double = 10) -> Bool { server.waitUntilIdle(seconds: seconds) }

  private func random() -> Double {
    randomState.withLock { $0.unit() }
  }

  /// What the origin answers `request` with: after the latency, a 404 for anything but an
  /// item, the configured share of failures (503, reset, body cut short), a 304 for a
  /// matching `If-None-Match`, else the item's image at its current revision. Every response
  /// closes its connection, as the origin a run imitates does.
  private func respond(to request: LoopbackOrigin.Request) -> LoopbackOrigin.Response {
    let path = request.path
    var response = LoopbackOrigin.Response(status: 200)
    response.headers = ["Content-Type": behaviour.png ? "image/png" : "image/jpeg"]
    response.close = true
    let delay = behaviour.latencyMs + random() * behaviour.jitterMs
    response.delayMicroseconds = UInt32(max(0, delay) * 1000)
    guard path.hasPrefix("/item/"), let dot = path.lastIndex(of: "."),
      let item = Int(path[path.index(path.startIndex, offsetBy: 6)..<dot]),
      item >= 0, item <= ItemImage.maxItem
    else {
      response.status = 404
      response.body = Array("no such item\n".utf8)
      return response
    }
    let failure = random()
    if failure < behaviour.errorRate / 3 {
      response.status = 503
      response.body = Array("origin overloaded\n".utf8)
      return response
    }
    if failure < behaviour.errorRate * 2 / 3 {
      response.reset = true
      return response
    }
    let revision = mutations.map { $0.revision(of: item, at: $0.elapsed) } ?? 0
    if let maxAge = behaviour.maxAge {
      let etag = "\"\(item).\(revision)\""
      response.headers["ETag"] = etag
      response.headers["Cache-Control"] = "max-age=\(maxAge)"
      if let asked = request.headers["if-none-match"] {
        conditionalCount.add(1, ordering: .relaxed)
        if asked == etag {
          notModifiedCount.add(1, ordering: .relaxed)
          response.status = 304
          return response
        }
      }
    }
    guard let body = image(item, revision: revision) else {
      response.status = 500
      return response
    }
    response.body = body
    if failure < behaviour.errorRate {
      // Cut short: the whole length declared, half the body sent, then the close.
      response.declaredLength = body.count
      response.body = Array(body.prefix(body.count / 2))
    }
    if behaviour.bandwidth > 0 { response.bytesPerSecond = behaviour.bandwidth }
    return response
  }

  /// Items from here on are filler (the prefetch flood): distinct URLs the server must fetch
  /// and decode, all answered with one pre-encoded image, so the flood loads the server and
  /// not this load generator.
  public static let fillerItems = 10_000_000

  /// Encodes these items now, on all cores, so their first requests are answered at once.
  public func prepare(items: [Int]) {
    let wanted = items.filter { $0 < Self.fillerItems }
    DispatchQueue.concurrentPerform(iterations: wanted.count) { index in
      _ = image(wanted[index])
    }
  }

  private func image(_ item: Int, revision: Int = 0) -> [UInt8]? {
    if item >= Self.fillerItems { return filler }
    let key = item * ItemImage.revisions + revision % ItemImage.revisions
    if let cached = images.withLock({ $0.bytes[key] }) { return cached }
    guard
      let bytes = try? ItemImage.encoded(
        item: item, revision: revision, width: behaviour.width, height: behaviour.height,
        png: behaviour.png, progressive: behaviour.progressive)
    else { return nil }
    images.withLock { cache in
      cache.bytes[key] = bytes
      cache.order.append(key)
      cache.total += bytes.count
      // Bounded: the oldest images are made again if asked for.
      while cache.total > 96 << 20, !cache.order.isEmpty {
        let oldest = cache.order.removeFirst()
        cache.total -= cache.bytes.removeValue(forKey: oldest)?.count ?? 0
      }
    }
    return bytes
  }
}

/// Why a run could not start or finish.
public enum HarnessError: Error, CustomStringConvertible {
  /// Setting up the origin, daemon or target failed.
  case setup(String)

  /// The explanation.
  public var description: String {
    switch self {
    case .setup(let message): message
    }
  }
}
