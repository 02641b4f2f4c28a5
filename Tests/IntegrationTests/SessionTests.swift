import CSystem
import Foundation
import ImagePipeline
import Synchronization
import Testing
import ThumbClient
import ThumbSystem
import ThumbWire

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The session protocol end to end: the real daemon, a real loopback origin, ThumbClient.
@Suite("Session protocol", .serialized, .onLane(.clients))
struct SessionTests {
  /// Item `n` is a 24x24 PNG of one colour, so any thumbnail of it says which item it shows.
  static func colour(of item: Int) -> (UInt8, UInt8, UInt8) {
    (UInt8((item * 53) & 0xFF), UInt8((item * 97 + 40) & 0xFF), UInt8((item * 29 + 80) & 0xFF))
  }

  static let itemCount = 60

  static func itemImage(_ item: Int) -> [UInt8] {
    let (r, g, b) = colour(of: item)
    let pixels = [UInt8]((0..<(24 * 24)).flatMap { _ in [r, g, b] })
    return try! ImageEncoder.png(Bitmap(pixels: pixels, width: 24, height: 24, channels: 3))
  }

  /// The item whose colour is nearest to the thumbnail's centre pixel.
  static func item(shownBy data: [UInt8]) -> Int? {
    guard let bitmap = try? Thumbnailer().decodeFullResolution(.bytes(data)) else { return nil }
    let centre = ((bitmap.height / 2) * bitmap.width + bitmap.width / 2) * bitmap.channels
    let pixel = bitmap.pixels[centre..<centre + 3].map { Int($0) }
    return (0..<itemCount).min { a, b in
      distance(colour(of: a), pixel) < distance(colour(of: b), pixel)
    }
  }

  private static func distance(_ c: (UInt8, UInt8, UInt8), _ p: [Int]) -> Int {
    abs(Int(c.0) - p[0]) + abs(Int(c.1) - p[1]) + abs(Int(c.2) - p[2])
  }

  /// An origin serving `/item/N.png`, each answer delayed by a pseudo-random 0-3 ms so results
  /// finish out of order; `/held/N.png` waits for `release()`.
  static func makeOrigin() throws -> LoopbackOrigin {
    let images = (0..<itemCount).map(itemImage)
    return try LoopbackOrigin { path in
      let parts = path.split(separator: "/")
      guard parts.count == 2, let n = Int(parts[1].dropLast(4)), n < itemCount else {
        return .init(status: 404)
      }
      let delay = UInt32((n * 7919 + path.utf8.count * 31) % 3000)
      if parts[0] == "held" { return .init(body: images[n], holdUntilReleased: true) }
      return .init(body: images[n], delayMicroseconds: delay)
    }.start()
  }

  /// Collects a client's events on a task of its own.
  final class EventLog: Sendable {
    private let recorder = Recorder<ThumbClient.Event>()
    private let task: Task<Void, Never>

    init(_ client: ThumbClient) {
      let recorder = self.recorder
      let ended = self.ended
      task = Task {
        for await event in client.events { recorder.append(event) }
        ended.append(true)
      }
    }

    private let ended = Recorder<Bool>()
    /// The connection has closed and every event is in.
    var isFinished: Bool { !ended.values.isEmpty }

    var events: [ThumbClient.Event] { recorder.values }
    var images: [ThumbClient.Image] {
      events.compactMap { if case .image(let image) = $0 { image } else { nil } }
    }
    func finished() async { await task.value }
  }

  @Test("1000+ random slot reuses: tokens only move forward per slot, every image shows its item")
  func randomisedSlotReuse() async throws {
    let origin = try Self.makeOrigin()
    defer { origin.stop() }
    // A process: 1,800 loads are load, and in the test process's two cooperative threads,
    // shared with every other test, they did not end within two minutes.
    let daemon = try await TestDaemon.start(["--allow-private", "--cache-dir", ""])
    defer { daemon.stop() }
    // Two sessions at once: one passes frames on raw (checks the daemon), one verifies
    // (checks ThumbClient's own guard), sharing the daemon's work.
    let raw = try ThumbClient(endpoint: .unix(daemon.socket), verifyTokens: false)
    let verified = try ThumbClient(endpoint: .unix(daemon.socket))
    let rawLog = EventLog(raw)
    let verifiedLog = EventLog(verified)
    var generator = SeededRandom(seed: 20_261_130)
    let slots = 8
    var tokens = [Int](repeating: 0, count: slots)
    var live: [Int: (item: String, token: Int)] = [:]
    var reuses = 0
    for step in 0..<1800 {
      let slot = Int.random(in: 0..<slots, using: &generator)
      let roll = Int.random(in: 0..<100, using: &generator)
      let client = step % 2 == 0 ? raw : verified
      // Each client has its own slots: raw uses 0..<8, verified 8..<16.
      let wire = slot + (client === raw ? 0 : slots)
      if roll < 75 || live[wire] == nil {
        let item = Int.random(in: 0..<Self.itemCount, using: &generator)
        tokens[slot] += 1
        if live[wire] != nil { reuses += 1 }
        let size = [16, 20][Int.random(in: 0..<2, using: &generator)]
        try client.load(
          slot: wire, item: "item-\(item)", token: tokens[slot],
          url: origin.url("/item/\(item).png"), width: size, height: size, format: .png,
          priority: roll % 3 == 0 ? .prefetch : .visible)
        live[wire] = ("item-\(item)", tokens[slot])
      } else if roll < 88, let current = live[wire] {
        try client.cancel(slot: wire, token: current.token)
        live[wire] = nil
      } else if let current = live[wire] {
        try client.setPriority(slot: wire, token: current.token, priority: .normal)
      }
      if step % 100 == 99 { await Task.yield() }
    }
    #expect(reuses >= 1000)
    // Every load still bound at the end gets its image: nothing is lost.
    await eventually("final loads delivered") {
      let delivered = Set((rawLog.images + verifiedLog.images).map { "\($0.slot)/\($0.token)" })
      return live.allSatisfy { delivered.contains("\($0.key)/\($0.value.token)") }
    }
    raw.close()
    verified.close()
    await rawLog.finished()
    await verifiedLog.finished()
    for log in [rawLog, verifiedLog] {
      var lastToken: [Int: Int] = [:]
      var seen: Set<String> = []
      for image in log.images {
        #expect(image.token > lastToken[image.slot] ?? 0, "slot \(image.slot) went backwards")
        lastToken[image.slot] = image.token
        #expect(seen.insert("\(image.slot)/\(image.token)").inserted, "delivered twice")
        #expect(Self.item(shownBy: image.data).map { "item-\($0)" } == image.item)
      }
      let errors = log.events.filter { if case .error = $0 { true } else { false } }
      #expect(errors.isEmpty, "\(errors.prefix(3))")
    }
    // The verifying client delivered only what its slots held when results arrived.
    for image in verifiedLog.images { #expect(image.slot >= slots) }
  }

  @Test("a superseded or cancelled load never gets its result, even when others share the work")
  func supersededAndCancelledGetNothing() async throws {
    let origin = try Self.makeOrigin()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--cache-dir", ""], driver: .inProcess)
    defer { daemon.stop() }
    let first = try ThumbClient(endpoint: .unix(daemon.socket), verifyTokens: false)
    let other = try ThumbClient(endpoint: .unix(daemon.socket), verifyTokens: false)
    let firstLog = EventLog(first)
    let otherLog = EventLog(other)
    let held = origin.url("/held/7.png")
    try first.load(slot: 0, item: "held", token: 1, url: held, width: 16, height: 16)
    try first.load(slot: 1, item: "held", token: 1, url: held, width: 16, height: 16)
    try other.load(slot: 0, item: "held", token: 1, url: held, width: 16, height: 16)
    await eventually("download held") { origin.held == 1 }
    // Slot 0 moves on to another item; slot 1 is cancelled. The other client still wants it.
    try first.load(
      slot: 0, item: "item-3", token: 2, url: origin.url("/item/3.png"), width: 16, height: 16)
    try first.cancel(slot: 1, token: 1)
    await eventually("new item shown") { firstLog.images.contains { $0.token == 2 } }
    origin.release()
    await eventually("other client served") { otherLog.images.count == 1 }
    // A later load on a fresh slot is answered after anything queued before it.
    try first.load(
      slot: 2, item: "item-3", token: 1, url: origin.url("/item/3.png"), width: 16, height: 16)
    await eventually("sync load answered") { firstLog.images.contains { $0.slot == 2 } }
    first.close()
    other.close()
    await firstLog.finished()
    #expect(firstLog.images.map { "\($0.slot)/\($0.token)" } == ["0/2", "2/1"])
    #expect(firstLog.images.allSatisfy { $0.item == "item-3" })
    #expect(origin.requests.filter { $0.hasPrefix("/held") }.count == 1)
  }

  @Test("prefetch warms the cache: prefetched, then a load of the item is a memory hit")
  func prefetchThenLoad() async throws {
    let origin = try Self.makeOrigin()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--cache-dir", ""], driver: .inProcess)
    defer { daemon.stop() }
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    let log = EventLog(client)
    let items = (10..<14).map { (item: "item-\($0)", url: origin.url("/item/\($0).png")) }
    try client.prefetch(round: 1, items: items, width: 16, height: 16)
    try client.prefetch(
      round: 2, items: [(item: "missing", url: origin.url("/nothing"))], width: 16, height: 16)
    await eventually("round done") { log.events.count == 5 }
    let prefetched = Set(
      log.events.compactMap { if case .prefetched(1, let item) = $0 { item } else { nil } })
    #expect(prefetched == Set(items.map(\.item)))
    #expect(log.events.contains(.prefetchError(round: 2, item: "missing", code: "http_status")))
    try client.release(round: 1)
    try client.load(slot: 5, item: "item-11", token: 9, url: items[1].url, width: 16, height: 16)
    await eventually("loaded") { log.images.count == 1 }
    #expect(log.images.first?.cache == "memory")
    #expect(Self.item(shownBy: log.images[0].data) == 11)
    client.close()
  }

  @Test("a session's prefetch beyond 32 items waits in its own queue; a release drops it unstarted")
  func prefetchQueueIsBounded() async throws {
    let origin = try Self.makeOrigin()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--cache-dir", ""], driver: .inProcess)
    defer { daemon.stop() }
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    let log = EventLog(client)
    // Held: every download the origin sees stays open until the test lets it go.
    let items = (0..<50).map { (item: "h\($0)", url: origin.url("/held/\($0).png")) }
    try client.prefetch(round: 1, items: items, width: 16, height: 16)
    // 8 places (prefetch_concurrency) downloading, 24 more started and waiting for a place;
    // the other 18 never became pipeline work.
    await eventually("8 downloads held") { origin.held == 8 }
    await eventually("24 waiting for a place") {
      await daemon.awaitMetric("thumbd_queued{stage=\"prefetch\"}") == 24
    }
    #expect(await daemon.awaitMetric("thumbd_inflight{stage=\"prefetch\"}") == 8)
    try client.release(round: 1)
    await eventually("nothing waiting") {
      await daemon.awaitMetric("thumbd_queued{stage=\"prefetch\"}") == 0
    }
    await eventually("no place held") {
      await daemon.awaitMetric("thumbd_inflight{stage=\"prefetch\"}") == 0
    }
    // Only the 8 admitted items ever reached the origin, and the released round says nothing.
    #expect(Set(origin.requests).count == 8, "\(origin.requests)")
    #expect(log.events.isEmpty)
    for _ in 0..<8 { origin.release() }
    client.close()
  }

  @Test("the client refuses a frame over the 16 KiB header limit, sends nothing, stays open")
  func oversizedFrameRefused() async throws {
    let daemon = try await TestDaemon.start(["--cache-dir", ""], driver: .inProcess)
    defer { daemon.stop() }
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    let log = EventLog(client)
    let items = (0..<1000).map { (item: "item-\($0)", url: "http://example.com/\($0).jpg") }
    #expect {
      try client.prefetch(round: 1, items: items, width: 16, height: 16)
    } throws: { error in
      guard case .frameTooLarge(let length) = error as? ThumbClient.ClientError else {
        return false
      }
      return length > SessionFrameReader.headerLimit
    }
    // The daemon never saw it: the session is still open and answers.
    try client.load(
      slot: 2, item: "b", token: 1, url: "http://127.0.0.1/b.jpg", width: 10, height: 10)
    await eventually("an answer") { log.events.count == 1 }
    #expect(
      log.events.first.map {
        if case .error(_, _, _, "not_allowed", _) = $0 { true } else { false }
      } == true)
    client.close()
  }

  @Test("invalid parameters get an invalid_spec error for the slot; the session goes on")
  func invalidSpecKeepsSession() async throws {
    let daemon = try await TestDaemon.start(["--cache-dir", ""], driver: .inProcess)
    defer { daemon.stop() }
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    let log = EventLog(client)
    try client.load(
      slot: 1, item: "a", token: 1, url: "http://example.com/a.jpg", width: -5, height: 10)
    try client.load(
      slot: 2, item: "b", token: 1, url: "http://127.0.0.1/b.jpg", width: 10, height: 10)
    await eventually("two answers") { log.events.count == 2 }
    let codes = log.events.compactMap {
      if case .error(_, _, _, let code, _) = $0 { code } else { nil }
    }
    #expect(codes == ["invalid_spec", "not_allowed"])
    client.close()
  }

  @Test("bytes that are no message get bad_frame and a closed connection; other sessions go on")
  func malformedFrames() async throws {
    let origin = try Self.makeOrigin()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--cache-dir", ""], driver: .inProcess)
    defer { daemon.stop() }
    let bystander = try ThumbClient(endpoint: .unix(daemon.socket))
    let bystanderLog = EventLog(bystander)
    for input in MalformedFrames.framing {
      let client = try ThumbClient(endpoint: .unix(daemon.socket), verifyTokens: false)
      let log = EventLog(client)
      try? client.sendRaw(input.bytes)
      await eventually("connection closed") { log.isFinished }
      guard case .error(nil, nil, nil, Wire.Code.badFrame, let message)? = log.events.last else {
        Issue.record("no bad_frame for \(input.testDescription): \(log.events)")
        continue
      }
      #expect(message.contains(input.blames), "\(input.testDescription): \(message)")
    }
    // The daemon is healthy and the bystander's session still works.
    #expect(SocketClient.get(daemon.socket, "/healthz").status == 200)
    try bystander.load(
      slot: 0, item: "item-5", token: 1, url: origin.url("/item/5.png"), width: 16, height: 16)
    await eventually("bystander served") { bystanderLog.images.count == 1 }
    bystander.close()
  }

  /// Issue 52: one typo (an invalid priority, `rev:""`, `scale:"2"`, `w:64.0`, a 257th open
  /// round) closed the session and lost every pending load of every slot.
  @Test(
    "every message with a bad field gets bad_message where it points; the session goes on serving its other slots"
  )
  func refusedMessages() async throws {
    let origin = try Self.makeOrigin()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--cache-dir", ""], driver: .inProcess)
    defer { daemon.stop() }
    let client = try ThumbClient(endpoint: .unix(daemon.socket), verifyTokens: false)
    let log = EventLog(client)
    // Pending work the refusals must not touch: a load on slot 0 and a prefetch round, both
    // held at the origin.
    try client.load(
      slot: 0, item: "held", token: 1, url: origin.url("/held/1.png"), width: 16, height: 16)
    try client.prefetch(
      round: 4, items: [(item: "h", url: origin.url("/held/2.png"))], width: 8, height: 8)
    func refusals() -> [ServerMessage] {
      log.events.filter {
        if case .error(_, _, _, Wire.Code.badMessage, _) = $0 { true } else { false }
      }
    }
    for (index, input) in MalformedFrames.refused.enumerated() {
      try client.sendRaw(input.bytes)
      await eventually("the answer to \(input.testDescription)") { refusals().count == index + 1 }
      guard case .error(let slot, let item, let token, _, let message) = refusals()[index] else {
        continue
      }
      #expect(
        slot == input.slot && item == input.item && token == input.token,
        "\(input.testDescription): \(refusals()[index])")
      #expect(message.contains(input.blames), "\(input.testDescription): \(message)")
    }
    // A round number still open: answered alone; round 4's item stays pending.
    try client.prefetch(
      round: 4, items: [(item: "again", url: origin.url("/item/3.png"))], width: 8, height: 8)
    await eventually("the reused round's answer") {
      refusals().count == MalformedFrames.refused.count + 1
    }
    guard case .error(nil, nil, nil, _, let reused)? = refusals().last else {
      Issue.record("no connection-level answer: \(refusals().last.map { "\($0)" } ?? "none")")
      return
    }
    #expect(reused.contains("round 4") && reused.contains("still open"), "\(reused)")
    // Every refusal left the session serving: another slot gets its image.
    try client.load(
      slot: 2, item: "item-7", token: 1, url: origin.url("/item/7.png"), width: 16, height: 16)
    await eventually("another slot is served") { log.images.contains { $0.slot == 2 } }
    // 255 more rounds open (256 in all), then one past the bound: its items are busy.
    for round in 100..<355 {
      try client.prefetch(
        round: round, items: [(item: "r\(round)", url: origin.url("/held/\(round % 50).png"))],
        width: 8, height: 8)
    }
    try client.prefetch(
      round: 999, items: [(item: "over", url: origin.url("/item/4.png"))], width: 8, height: 8)
    await eventually("the round past the bound is answered busy") {
      log.events.contains {
        if case .prefetchError(999, "over", Wire.Code.busy) = $0 { true } else { false }
      }
    }
    #expect(!log.isFinished, "the session is still open")
    // Every refusal left the held work alone: released, it is delivered.
    await eventually("the held load and round finish") {
      for _ in 0..<origin.held { origin.release() }
      return log.images.contains { $0.slot == 0 && $0.item == "held" }
        && log.events.contains { if case .prefetched(4, "h") = $0 { true } else { false } }
    }
    client.close()
    await log.finished()
  }

  @Test("a session upgrade without the headers gets 426; the upgrade works over TCP too")
  func upgradeRules() async throws {
    let origin = try Self.makeOrigin()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(
      [
        "--allow-private", "--cache-dir", "", "--listen", "127.0.0.1:0",
      ], driver: .inProcess)
    defer { daemon.stop() }
    #expect(SocketClient.get(daemon.socket, "/v1/session").status == 426)
    let port = try #require(Self.tcpPort(in: daemon.log))
    let client = try ThumbClient(endpoint: .tcp(host: "127.0.0.1", port: port))
    let log = EventLog(client)
    try client.load(
      slot: 3, item: "item-8", token: 4, url: origin.url("/item/8.png"), width: 12, height: 12)
    await eventually("served over TCP") { log.images.count == 1 }
    #expect(log.images.first.map { Self.item(shownBy: $0.data) } == 8)
    client.close()
  }

  /// Issue 52: an upgrade pipelined behind another request was served as an ordinary request
  /// (426, "send Connection: Upgrade ..." although both were sent) and the connection stayed
  /// open: the handler took the first request of the batch for the one the parser stopped at.
  @Test(
    "an upgrade pipelined behind an answered request upgrades; behind an unanswered one, 400 and close; never 426"
  )
  func pipelinedUpgrade() async throws {
    let origin = try Self.makeOrigin()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--cache-dir", ""], driver: .inProcess)
    defer { daemon.stop() }
    let upgrade =
      "GET /v1/session HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
      + "Upgrade: thumbd-session\r\n\r\n"
    // A frame answered at once (bad_message) shows the session is live; the half-close ends it.
    let frame = "{\"op\":\"release\",\"round\":-1}\n"
    let socket = daemon.socket
    let answered = try await offPool {
      let fd = SocketClient.connect(socket)
      defer { close(fd) }
      SocketClient.sendAll(
        fd, Array(("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + upgrade + frame).utf8))
      shutdown(fd, Int32(SHUT_WR))
      return String(decoding: SocketClient.readToEnd(fd), as: UTF8.self)
    }
    let ok = try #require(answered.range(of: "HTTP/1.1 200"), "\(answered)")
    let switched = try #require(answered.range(of: "HTTP/1.1 101"), "\(answered)")
    #expect(ok.lowerBound < switched.lowerBound)
    #expect(answered.contains(Wire.Code.badMessage) && !answered.contains("426"), "\(answered)")
    // Behind a thumbnail still waiting at the origin, the upgrade is refused once that is
    // answered, and the connection closes.
    let held = PercentEncoding.encode(origin.url("/held/3.png"))
    let waiting = StartedThread {
      String(
        decoding: SocketClient.exchange(
          socket,
          Array(
            ("GET /v1/thumbnail?w=8&h=8&url=\(held) HTTP/1.1\r\nHost: x\r\n\r\n" + upgrade).utf8)),
        as: UTF8.self)
    }
    await eventually("the held request reached the origin") { origin.held == 1 }
    origin.release()
    let refused = try await waiting.value
    let thumbnail = try #require(refused.range(of: "HTTP/1.1 200"), "\(refused)")
    let bad = try #require(refused.range(of: "HTTP/1.1 400"), "\(refused)")
    #expect(thumbnail.lowerBound < bad.lowerBound && !refused.contains("426"), "\(refused)")
  }

  @Test("the TCP listener takes an IPv6 address: [::1]:0 serves, on that address alone")
  func ipv6Listener() async throws {
    let daemon = try await TestDaemon.start(
      ["--cache-dir", "", "--listen", "[::1]:0"], driver: .inProcess)
    defer { daemon.stop() }
    let log = daemon.log
    let range = try #require(log.range(of: "[::1]:"), "\(log)")
    let port = try #require(UInt16(log[range.upperBound...].prefix { $0.isNumber }))
    let fd = ts_connect_tcp("::1", port)
    try #require(fd >= 0, "connect to [::1]:\(port): \(fd)")
    defer { close(fd) }
    #expect(
      SocketClient.sendAll(
        fd, Array("GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".utf8)))
    #expect(SocketClient.status(of: SocketClient.readToEnd(fd)) == 200)
    // Not IPv4 as well: the listener is that address alone.
    #expect(ts_connect_tcp("127.0.0.1", port) < 0)
  }

  /// The TCP port from the daemon's `listening` log line, which the daemon writes before it
  /// answers anything (so before `TestDaemon.start` returns).
  static func tcpPort(in log: String) -> UInt16? {
    guard let range = log.range(of: "127.0.0.1:") else { return nil }
    return UInt16(log[range.upperBound...].prefix { $0.isNumber })
  }
}
