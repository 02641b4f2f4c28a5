import Foundation
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

/// A real HTTP/1.1 origin on 127.0.0.1 serving `/item/N.jpg` (or `.png`): each image encodes
/// its item number and revision (`ItemImage`); with `Mutations`, items change as the run goes
/// on. It counts every request and the body bytes it sent, per path, which is how the harness
/// knows origin fetches and wasted bytes.
public final class SyntheticOrigin: ImageOrigin, @unchecked Sendable {
  // @unchecked: the listener is only closed in stop(); all other state is behind Mutexes.
  /// The port it listens on.
  public let port: UInt16
  private let behaviour: OriginBehaviour
  private let listener: Int32
  private let log = Mutex<[String: (requests: Int, bytes: Int)]>([:])
  private let timings = Mutex<[String: [OriginTransfer]]>([:])
  private let images = Mutex<(bytes: [Int: [UInt8]], total: Int, order: [Int])>(([:], 0, []))
  private let stopped = Atomic<Bool>(false)
  private let filler: [UInt8]?
  private let randomState = Mutex(SeededRandom(seed: 1))
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
    randomState.withLock { $0 = SeededRandom(seed: seed) }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard fd >= 0, bound == 0, listen(fd, 512) == 0 else {
      throw HarnessError.setup("origin cannot listen: \(String(cString: strerror(errno)))")
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    listener = fd
    self.port = UInt16(bigEndian: address.sin_port)
    let thread = Thread { [self] in acceptLoop() }
    thread.name = "origin-accept"
    thread.start()
  }

  /// The URL of item `n`.
  public func url(item: Int) -> String {
    "http://127.0.0.1:\(port)/item/\(item).\(behaviour.png ? "png" : "jpg")"
  }

  /// Requests per path so far.
  public var requests: [String: Int]? { log.withLock { $0.mapValues(\.requests) } }

  /// Body bytes sent per path so far.
  public var bytesSent: [String: Int]? { log.withLock { $0.mapValues(\.bytes) } }

  /// The `max-age` sent with every image, if any.
  public var maxAge: Int? { behaviour.maxAge }

  /// The last few image bodies sent per path, first byte to last.
  public var transfers: [String: [OriginTransfer]]? { timings.withLock { $0 } }

  /// Conditional requests received, and how many were answered 304.
  public var revalidations: (asked: Int, notModified: Int) {
    (conditionalCount.load(ordering: .relaxed), notModifiedCount.load(ordering: .relaxed))
  }

  /// Stops accepting.
  public func stop() {
    guard !stopped.exchange(true, ordering: .relaxed) else { return }
    // Wakes the accept loop, which closes the listener itself, so the number cannot be
    // reused by another socket while the loop is about to accept on it.
    shutdown(listener, Int32(SHUT_RDWR))
  }

  private func acceptLoop() {
    defer { close(listener) }
    while !stopped.load(ordering: .relaxed) {
      let connection = accept(listener, nil, nil)
      if connection < 0 {
        if errno == EINTR { continue }
        return
      }
      Thread { [self] in serve(connection) }.start()
    }
  }

  private func random() -> Double {
    randomState.withLock { $0.unit() }
  }

  private func serve(_ connection: Int32) {
    defer { close(connection) }
    var head: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while head.firstRange(of: [13, 10, 13, 10]) == nil && head.count < 65536 {
      let n = read(connection, &buffer, buffer.count)
      if n <= 0 { return }
      head += buffer[0..<n]
    }
    let line = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self)
    let parts = line.split(separator: " ")
    guard parts.count >= 2 else { return }
    let path = String(parts[1])
    log.withLock { $0[path, default: (0, 0)].requests += 1 }
    let delay = behaviour.latencyMs + random() * behaviour.jitterMs
    usleep(UInt32(max(0, delay) * 1000))
    guard path.hasPrefix("/item/"), let dot = path.lastIndex(of: "."),
      let item = Int(path[path.index(path.startIndex, offsetBy: 6)..<dot]),
      item >= 0, item <= ItemImage.maxItem
    else {
      respond(connection, status: 404, body: Array("no such item\n".utf8), path: path)
      return
    }
    let failure = random()
    if failure < behaviour.errorRate / 3 {
      respond(connection, status: 503, body: Array("origin overloaded\n".utf8), path: path)
      return
    }
    if failure < behaviour.errorRate * 2 / 3 {
      // A reset: RST instead of an answer.
      var linger = linger(l_onoff: 1, l_linger: 0)
      setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
      return
    }
    let revision = mutations.map { $0.revision(of: item, at: $0.elapsed) } ?? 0
    var headers: [String] = []
    if let maxAge = behaviour.maxAge {
      let etag = "\"\(item).\(revision)\""
      headers = ["ETag: \(etag)", "Cache-Control: max-age=\(maxAge)"]
      if let asked = Self.field("if-none-match", in: head) {
        conditionalCount.add(1, ordering: .relaxed)
        if asked == etag {
          notModifiedCount.add(1, ordering: .relaxed)
          respond(connection, status: 304, body: [], path: path, headers: headers)
          return
        }
      }
    }
    guard let body = image(item, revision: revision) else {
      respond(connection, status: 500, body: [], path: path)
      return
    }
    let truncate = failure < behaviour.errorRate
    respond(
      connection, status: 200, body: body, path: path, cutAt: truncate ? body.count / 2 : nil,
      headers: headers)
  }

  /// A request header's value, by lower-cased name.
  private static func field(_ name: String, in head: [UInt8]) -> String? {
    let text = String(decoding: head, as: UTF8.self)
    for line in text.split(separator: "\r\n").dropFirst() {
      guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == name else {
        continue
      }
      return String(line[line.index(after: colon)...].trimmingWhitespace())
    }
    return nil
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

  private func respond(
    _ connection: Int32, status: Int, body: [UInt8], path: String, cutAt: Int? = nil,
    headers: [String] = []
  ) {
    let head =
      "HTTP/1.1 \(status) X\r\nContent-Length: \(body.count)\r\nConnection: close\r\n"
      + "Content-Type: \(behaviour.png ? "image/png" : "image/jpeg")\r\n"
      + headers.map { $0 + "\r\n" }.joined() + "\r\n"
    guard writeAll(connection, Array(head.utf8)[...]) else { return }
    let limit = cutAt ?? body.count
    let started = ContinuousClock.now
    defer {
      if status == 200 && limit > 0 {
        let transfer = OriginTransfer(start: started, end: .now)
        // The last four per path: a run fetches an item again only after a cancel.
        timings.withLock { $0[path, default: []] = ($0[path, default: []] + [transfer]).suffix(4) }
      }
    }
    var sent = 0
    let chunk = behaviour.bandwidth > 0 ? max(1024, behaviour.bandwidth / 50) : limit
    while sent < limit {
      let end = min(limit, sent + chunk)
      guard writeAll(connection, body[sent..<end]) else { break }
      log.withLock { $0[path, default: (0, 0)].bytes += end - sent }
      sent = end
      if behaviour.bandwidth > 0 && sent < limit {
        usleep(UInt32(Double(chunk) / Double(behaviour.bandwidth) * 1_000_000))
      }
    }
  }

  private func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
    var offset = bytes.startIndex
    while offset < bytes.endIndex {
      let n = bytes[offset...].withUnsafeBytes {
        send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return false }
      offset += n
    }
    return true
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
