import Foundation
import Synchronization
import Testing
import ThumbClient

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The origin fetcher's findings through the real daemon: hostile origins cannot wedge it or
/// its memory, one client cannot take every download slot, a client leaving stops its
/// download, connections are reused, and (in a network namespace whose DNS the test runs) a
/// rebinding name never reaches loopback and a resolver that never answers holds nothing.
@Suite("Fetcher through the daemon", .serialized, .onLane(.clients))
struct FetcherDaemonTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  static func target(_ url: String, size: Int = 64) -> String {
    "/v1/thumbnail?url=\(url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
      + "&w=\(size)&h=\(size)"
  }

  /// A blocking GET on a thread of its own: the status, and how long it took, timed on that
  /// thread, so a busy test process's queue is not counted as the daemon's latency.
  static func get(_ socket: String, _ target: String) async -> (status: Int, seconds: Double) {
    (try? await offPool { () -> (Int, Double) in
      let started = ContinuousClock.now
      let status = SocketClient.get(socket, target).status
      let elapsed = started.duration(to: .now).components
      return (status, Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18)
    }) ?? (0, 0)
  }

  @Test(
    "hostile origins (endless bodies, 1-byte chunks, a lying 10 GiB length, a 302 with an endless body, gzip bombs) are each answered in time, in bounded memory, while other origins are served"
  )
  func hostileOrigins() async throws {
    let bomb = try await HostileInputs.gzipBomb(members: 160)  // 10 MB of gzip, 10 GiB inflated
    let hostile = try LoopbackOrigin { target in
      switch target.split(separator: "?").first.map(String.init) {
      case "/endless": return .init(endless: true, omitLength: true)
      case "/chunks": return .init(endless: true, chunkSize: 1)
      case "/lying": return .init(endless: true, declaredLength: 10 << 30)
      case "/redirect":
        return .init(
          status: 302, headers: ["Location": "/endless"], endless: true, omitLength: true)
      case "/bomb": return .init(headers: ["Content-Encoding": "gzip"], body: bomb)
      case "/silent": return .init(holdUntilStopped: true)
      default: return .init(status: 404)
      }
    }.start()
    defer { hostile.stop() }
    let healthy = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { healthy.stop() }
    let cap = 8 << 20
    let daemon = try await TestDaemon.start([
      "--allow-network", "127.0.0.0/8", "--max-source-bytes", "8MiB", "--request-timeout", "4",
      "--connect-timeout", "2", "--cache-dir", "",
    ])
    defer { daemon.stop() }
    #expect(await Self.get(daemon.socket, Self.target(healthy.url("/warm.jpg"))).status == 200)
    // One at a time first: each costs at most its capped body, whatever it claims to inflate to.
    let baseline = try #require(daemon.residentKiB)
    for path in ["/bomb", "/endless", "/chunks", "/lying", "/redirect"] {
      let answer = await Self.get(daemon.socket, Self.target(hostile.url(path + "?alone")))
      // 413 over the cap, 415 for a small bomb (not an image); 1-byte chunks may hit the
      // deadline first (504).
      #expect([413, 415, 504].contains(answer.status), "\(path) answered \(answer.status)")
    }
    let peak = try #require(daemon.peakResidentKiB)
    #expect(peak - baseline <= 2 * cap / 1024, "peak RSS grew by \(peak - baseline) KiB")
    // Then all at once, twice over, while another origin is asked for images.
    let paths = ["/endless", "/chunks", "/lying", "/redirect", "/bomb", "/silent"]
    async let hostileAnswers = withTaskGroup(of: (String, Int, Double).self) { group in
      for path in paths + paths {
        group.addTask {
          let answer = await Self.get(daemon.socket, Self.target(hostile.url(path + "?\(UUID())")))
          return (path, answer.status, answer.seconds)
        }
      }
      return await group.reduce(into: [(String, Int, Double)]()) { $0.append($1) }
    }
    // Meanwhile another origin is served at once, again and again.
    await eventually("hostile downloads under way") { hostile.requests.count >= 6 }
    var waits: [Double] = []
    for index in 0..<10 {
      let answer = await Self.get(daemon.socket, Self.target(healthy.url("/\(index).jpg")))
      #expect(answer.status == 200)
      waits.append(answer.seconds)
    }
    expectPrompt(waits, "a healthy origin's answers")
    for (path, status, seconds) in await hostileAnswers {
      #expect(status != 200 && status != 0, "\(path) answered \(status)")
      #expect(seconds < 4 + 2, "\(path) took \(seconds) s")
    }
    for path in ["/endless", "/chunks", "/lying", "/redirect"] {
      let sent = hostile.requests.filter { $0.hasPrefix(path + "?") && $0 != path + "?alone" }
      #expect(sent.count == 2, "\(path) fetched \(sent.count) times")
    }
  }

  @Test(
    "a session with 2000 loads to an origin that never answers leaves another client served within 1 s"
  )
  func oneClientCannotTakeEverySlot() async throws {
    let silent = try LoopbackOrigin { _ in .init(holdUntilStopped: true) }.start()
    defer { silent.stop() }
    let healthy = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { healthy.stop() }
    let daemon = try await TestDaemon.start(["--allow-private", "--cache-dir", ""])
    defer { daemon.stop() }
    let flood = try ThumbClient(endpoint: .unix(daemon.socket), verifyTokens: false)
    defer { flood.close() }
    for slot in 0..<2000 {
      try flood.load(
        slot: slot, item: "i\(slot)", token: 1, url: silent.url("/\(slot).jpg"), width: 32,
        height: 32)
    }
    await eventually("the silent origin holds its share of downloads") {
      silent.requests.count >= 8
    }
    var waits: [Double] = []
    for index in 0..<5 {
      let answer = await Self.get(daemon.socket, Self.target(healthy.url("/\(index).jpg")))
      #expect(answer.status == 200)
      waits.append(answer.seconds)
    }
    expectPrompt(waits, "the other client's answers")
  }

  @Test(
    "a client hanging up after 1 MiB of an endless body stops the download: at most 4 MiB more, a quarter second of the origin's pace"
  )
  func hangUpStopsTheDownload() async throws {
    // 16 KiB chunks go out at most one a millisecond (16 MiB/s): the bound leaves the daemon a
    // quarter second to notice on a loaded machine, where the 1 GiB cap would take a minute.
    let origin = try LoopbackOrigin { _ in .init(endless: true, chunkSize: 16384) }.start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start([
      "--allow-private", "--cache-dir", "", "--max-source-bytes", "1GiB",
    ])
    defer { daemon.stop() }
    let fd = SocketClient.connect(daemon.socket)
    #expect(fd >= 0)
    SocketClient.sendAll(
      fd,
      Array("GET \(Self.target(origin.url("/endless"))) HTTP/1.1\r\nHost: t\r\n\r\n".utf8))
    await eventually("1 MiB sent") { origin.liveBytes(for: "/endless") >= 1 << 20 }
    close(fd)
    let atHangUp = origin.liveBytes(for: "/endless")
    await eventually("the origin's writes fail") { origin.bytesSent(for: "/endless") != nil }
    let total = origin.bytesSent(for: "/endless") ?? .max
    #expect(total <= atHangUp + (4 << 20))
  }

  @Test("200 sequential misses from one origin use at most origin_connections connections")
  func keepAlive() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start([
      "--allow-private", "--cache-dir", "", "--origin-connections", "4",
    ])
    defer { daemon.stop() }
    for index in 0..<200 {
      #expect(await Self.get(daemon.socket, Self.target(origin.url("/\(index).jpg"))).status == 200)
    }
    #expect(origin.requests.count == 200)
    #expect(origin.connections <= 4, "\(origin.connections) connections")
    #expect(daemon.metric("thumbd_origin_connections_total").map { $0 <= 4 } == true)
  }

  // MARK: - In a network namespace

  static let namespaceTrait = Testing.ConditionTrait.enabled(
    if: NetworkNamespace.isAvailable || NetworkNamespace.isRequired,
    "needs root and iproute2 for a network namespace")

  @Test(
    "DNS rebinding: a name answering a public address, then 127.0.0.1, never reaches the loopback listener",
    namespaceTrait)
  func rebinding() async throws {
    let namespace = try NetworkNamespace(
      resolvConf: "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    defer { namespace.remove() }
    let dns = try namespace.inside {
      try TestDNSServer { name, type, before in
        guard name == "rebind.test" else { return [] }
        guard type == 1 else { return [] }
        // A public address first (nothing routes there in the namespace), loopback after.
        return before == 0 ? ["93.184.216.34"] : ["127.0.0.1"]
      }
    }.start()
    defer { dns.stop() }
    let trap = try namespace.inside { try LoopbackOrigin { _ in .init(body: Self.photo) } }.start()
    defer { trap.stop() }
    // Private addresses refused (the default); every attempt looks the name up again.
    let daemon = try await TestDaemon.start(
      ["--cache-dir", "", "--dns-cache-seconds", "0", "--connect-timeout", "1"],
      inside: namespace)
    defer { daemon.stop() }
    for index in 0..<20 {
      let answer = await Self.get(
        daemon.socket, Self.target("http://rebind.test:\(trap.port)/\(index).jpg"))
      #expect(answer.status == 403 || answer.status == 502, "answered \(answer.status)")
    }
    #expect(dns.queries(for: "rebind.test") >= 2, "the name was not looked up again")
    #expect(trap.connections == 0, "the loopback listener was reached \(trap.connections) times")
  }

  @Test(
    "a resolver that never answers: answered within request_timeout, fetch slots free once clients leave",
    namespaceTrait)
  func silentResolver() async throws {
    let namespace = try NetworkNamespace(
      resolvConf: "nameserver 127.0.0.1\noptions timeout:30 attempts:1\n")
    defer { namespace.remove() }
    let dns = try namespace.inside { try TestDNSServer { _, _, _ in nil } }.start()
    defer { dns.stop() }
    let healthy = try namespace.inside { try LoopbackOrigin { _ in .init(body: Self.photo) } }
      .start()
    defer { healthy.stop() }
    let daemon = try await TestDaemon.start(
      [
        "--cache-dir", "", "--allow-network", "127.0.0.0/8", "--request-timeout", "2",
        "--connect-timeout", "2",
      ], inside: namespace)
    defer { daemon.stop() }
    let answer = await Self.get(daemon.socket, Self.target("http://never.test/a.jpg"))
    #expect(answer.status == 504)
    #expect(answer.seconds < 3.5, "answered after \(answer.seconds) s")
    // 40 clients ask for 40 names nobody answers, and hang up.
    var sockets: [Int32] = []
    for index in 0..<40 {
      let fd = SocketClient.connect(daemon.socket)
      SocketClient.sendAll(
        fd,
        Array(
          "GET \(Self.target("http://n\(index).never.test/x.jpg")) HTTP/1.1\r\nHost: t\r\n\r\n".utf8
        ))
      sockets.append(fd)
    }
    // Anonymous HTTP clients count as one client: it holds at most 12 of the 16 slots.
    await eventually("lookups under way") { daemon.metric("thumbd_fetch_slots_in_use") == 12 }
    for fd in sockets { close(fd) }
    // The lookups are still stuck in the resolver, but nothing holds a download slot.
    await eventually("fetch slots free") { daemon.metric("thumbd_fetch_slots_in_use") == 0 }
    let served = await Self.get(daemon.socket, Self.target(healthy.url("/ok.jpg")))
    #expect(served.status == 200)
    #expect(served.seconds < 1)
  }
}
