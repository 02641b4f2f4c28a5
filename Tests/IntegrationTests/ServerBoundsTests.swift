import CSystem
import Foundation
import Testing
import ThumbClient

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon against clients that try to hold it: pipelining without reading, slow-loris
/// heads, a full connection table, no descriptors left, sessions announcing without end, and
/// hostile images beside a visible one. Each test fails on a server without the bound.
@Suite("Server bounds", .serialized, .onLane(.clients))
struct ServerBoundsTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  /// A connected, non-blocking client socket.
  static func connect(_ socket: String) throws -> Int32 {
    let fd = SocketClient.connect(socket)
    guard fd >= 0 else { throw POSIXError(.ECONNREFUSED) }
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    return fd
  }

  /// Waits (on a thread of its own) until the server has closed each connection: EOF or reset
  /// on read, whatever bytes came before. Returns those still open at `seconds`.
  static func awaitClosed(_ fds: [Int32], within seconds: Double) async -> Set<Int32> {
    (try? await offPool { () -> Set<Int32> in
      var open = Set(fds)
      let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
      var buffer = [UInt8](repeating: 0, count: 65536)
      while !open.isEmpty && ContinuousClock.now < deadline {
        var polls = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        guard poll(&polls, nfds_t(polls.count), 200) > 0 else { continue }
        for entry in polls where entry.revents != 0 {
          let n = read(entry.fd, &buffer, buffer.count)
          if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { open.remove(entry.fd) }
        }
      }
      return open
    }) ?? Set(fds)
  }

  /// Reads whole responses (head and Content-Length body) from a blocking connection, keeping
  /// what arrives beyond one for the next.
  final class ResponseReader {
    let fd: Int32
    private var bytes: [UInt8] = []

    init(_ fd: Int32) { self.fd = fd }

    /// The next response, or what came before the connection closed.
    func next() -> [UInt8] {
      var buffer = [UInt8](repeating: 0, count: 65536)
      while true {
        if let end = bytes.firstRange(of: [13, 10, 13, 10]) {
          let length = Int(SocketClient.header("Content-Length", in: bytes) ?? "0") ?? 0
          if bytes.count >= end.upperBound + length {
            defer { bytes.removeSubrange(..<(end.upperBound + length)) }
            return Array(bytes[..<(end.upperBound + length)])
          }
        }
        let n = read(fd, &buffer, buffer.count)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 {
          defer { bytes = [] }
          return bytes
        }
        bytes += buffer[0..<n]
      }
    }
  }

  /// One response from a connection nothing else reads.
  static func readResponse(_ fd: Int32) -> [UInt8] { ResponseReader(fd).next() }

  @Test(
    "a client pipelining 50 MB of requests without reading stops being read: the daemon holds at most a few MiB for it, and serves others"
  )
  func pipelinedWithoutReading() async throws {
    let daemon = try await TestDaemon.start(["--cache-dir", ""])
    defer { daemon.stop() }
    // /metrics answers are some kilobytes each: unbounded, 50 MB of requests would queue
    // gigabytes of answers.
    let request = Array("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n".utf8)
    let stream = Array([[UInt8]](repeating: request, count: 65536 / request.count).joined())
    let fd = try Self.connect(daemon.socket)
    defer { close(fd) }
    let baseline = try #require(daemon.residentKiB)
    let sent = try await offPool { () -> Int in
      var total = 0
      while total < 50 << 20 {
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        // Two seconds without room to write: the daemon stopped reading.
        let ready = poll(&entry, 1, 2000)
        if ready == 0 { break }
        if ready < 0 && errno == EINTR { continue }
        // A server that keeps reading is stopped before it takes the machine down.
        if (daemon.residentKiB ?? 0) - baseline > 512 * 1024 { break }
        let offset = total % stream.count
        let n = stream.withUnsafeBytes {
          send(fd, $0.baseAddress! + offset, stream.count - offset, Int32(MSG_NOSIGNAL))
        }
        if n > 0 {
          total += n
        } else if n < 0 && errno != EAGAIN && errno != EINTR {
          break
        }
      }
      return total
    }
    #expect(sent < 16 << 20, "the daemon read \(sent) bytes of requests nobody read answers to")
    #expect(SocketClient.get(daemon.socket, "/healthz").status == 200)
    let peak = try #require(daemon.peakResidentKiB)
    #expect(peak - baseline < 64 * 1024, "peak \(peak - baseline) KiB above the baseline")
    // The client reads at last: its answers come, complete and in order.
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
    let reader = ResponseReader(fd)
    for _ in 0..<1000 {
      let response = reader.next()
      guard SocketClient.status(of: response) == 200 else {
        Issue.record("an answer was lost: \(response.prefix(64))")
        break
      }
    }
  }

  @Test(
    "2000 slow-loris connections and a byte-a-moment trickler are closed by header_timeout; an idle keep-alive one by idle_timeout; a slow answer is not cut"
  )
  func slowLoris() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo, holdUntilReleased: true) }
      .start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start([
      "--cache-dir", "", "--allow-private", "--header-timeout", "1", "--idle-timeout", "2",
    ])
    defer { daemon.stop() }
    // A slow origin: the answer takes longer than both timeouts, and must still arrive.
    let slow = try Self.connect(daemon.socket)
    defer { close(slow) }
    let target = FetcherDaemonTests.target(origin.url("/slow.jpg"))
    _ = SocketClient.sendAll(slow, Array("GET \(target) HTTP/1.1\r\nHost: t\r\n\r\n".utf8))
    await eventually("the slow fetch reached the origin") { origin.held == 1 }

    var loris: [Int32] = []
    defer { for fd in loris { close(fd) } }
    for index in 0..<2000 {
      let fd = try Self.connect(daemon.socket)
      loris.append(fd)
      // Half send part of a head, half nothing at all.
      if index % 2 == 0 { _ = SocketClient.sendAll(fd, Array("GET /healthz HTTP/1.1\r\nHo".utf8)) }
    }
    // A head that keeps arriving, one byte at a time, never completes: activity is no excuse.
    let trickler = try Self.connect(daemon.socket)
    let trickled = DispatchSemaphore(value: 0)
    let trickling = Thread {
      defer { trickled.signal() }
      for byte in "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Pad: ".utf8
        + Array(repeating: 0x61, count: 400)
      {
        var value = byte
        guard send(trickler, &value, 1, Int32(MSG_NOSIGNAL)) == 1 else { return }
        usleep(100_000)
      }
    }
    trickling.start()
    // A kept-alive connection that goes quiet after one answer.
    let idle = SocketClient.connect(daemon.socket)
    defer { close(idle) }
    _ = SocketClient.sendAll(idle, Array("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n".utf8))
    #expect(SocketClient.status(of: Self.readResponse(idle)) == 200)

    // Meanwhile a normal client is served.
    #expect(SocketClient.get(daemon.socket, "/healthz").status == 200)
    let stillOpen = await Self.awaitClosed(loris + [trickler], within: 30)
    #expect(stillOpen.isEmpty, "\(stillOpen.count) slow heads still open")
    // The trickler's next send fails now; close its descriptor only once it has stopped.
    _ = try? await offPool { trickled.wait() }
    close(trickler)
    #expect(await Self.awaitClosed([idle], within: 30).isEmpty, "idle connection kept")
    // Both timeouts have passed for the slow request: it is answered all the same.
    origin.release()
    _ = fcntl(slow, F_SETFL, fcntl(slow, F_GETFL) & ~O_NONBLOCK)
    #expect(SocketClient.status(of: Self.readResponse(slow)) == 200)
  }

  @Test(
    "a full connection table closes the longest-idle connection for a new client, and refuses one only when none is idle"
  )
  func fullTable() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo, holdUntilReleased: true) }
      .start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start([
      "--cache-dir", "", "--allow-private", "--max-connections", "20",
      "--origin-connections", "64", "--fetch-concurrency", "64",
    ])
    defer { daemon.stop() }
    func busy(_ index: Int) throws -> Int32 {
      let fd = SocketClient.connect(daemon.socket)
      let target = FetcherDaemonTests.target(origin.url("/held/\(index).jpg"))
      _ = SocketClient.sendAll(fd, Array("GET \(target) HTTP/1.1\r\nHost: t\r\n\r\n".utf8))
      return fd
    }
    func healthz(_ fd: Int32) -> Int {
      _ = SocketClient.sendAll(fd, Array("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n".utf8))
      return SocketClient.status(of: Self.readResponse(fd))
    }
    // 19 connections waiting on the origin: busy, never closed for room.
    var held = try (0..<19).map(busy)
    defer { for fd in held { close(fd) } }
    await eventually("19 fetches held") { origin.held == 19 }
    // The 20th fills the table and goes idle after its answer.
    let first = SocketClient.connect(daemon.socket)
    defer { close(first) }
    #expect(healthz(first) == 200)
    // A 21st is admitted: the idle one is closed for it.
    let second = SocketClient.connect(daemon.socket)
    defer { close(second) }
    #expect(healthz(second) == 200)
    #expect(await Self.awaitClosed([first], within: 10).isEmpty, "the idle connection stayed")
    // Now every place is busy: a new connection is closed without an answer.
    held.append(try busy(19))
    await eventually("20 fetches held") { origin.held == 20 }
    #expect(await Self.awaitClosed([second], within: 10).isEmpty)
    let refused = SocketClient.connect(daemon.socket)
    defer { close(refused) }
    #expect(healthz(refused) == 0, "a connection past a table of busy ones was served")
    // The busy ones lost nothing.
    for _ in 0..<20 { origin.release() }
    for fd in held { #expect(SocketClient.status(of: Self.readResponse(fd)) == 200) }
  }

  @Test("out of descriptors, the daemon sheds new connections without spinning and recovers")
  func descriptorExhaustion() async throws {
    let daemon = try await TestDaemon.start(["--cache-dir", ""], descriptorLimit: 48)
    var clients: [Int32] = []
    // Far more connections than descriptors: the rest wait in the listen backlog.
    for _ in 0..<120 {
      let fd = SocketClient.connect(daemon.socket)
      if fd >= 0 { clients.append(fd) }
    }
    await eventually("the daemon ran out of descriptors") {
      daemon.log.contains("event=descriptors_exhausted")
    }
    // A loop that retried accept while EMFILE lasted would burn these two seconds of CPU; the
    // window has to be wall-clock, since spinning is what it measures.
    let before = try #require(daemon.cpuSeconds)
    try await Task.sleep(for: .seconds(2))
    let used = try #require(daemon.cpuSeconds) - before
    #expect(used < 0.5, "\(used) s of CPU in 2 s with no descriptors")
    for fd in clients { close(fd) }
    await eventually("serving again") { SocketClient.get(daemon.socket, "/healthz").status == 200 }
    #expect(daemon.stop() == 0)
  }

  @Test(
    "out of descriptors with 400 idle TCP connections, the idle ones give way: a new client is served, over the Unix socket too"
  )
  func idleConnectionsGiveWayWithoutDescriptors() async throws {
    let daemon = try await TestDaemon.start(
      ["--cache-dir", "", "--listen", "127.0.0.1:0"], descriptorLimit: 256)
    defer { daemon.stop() }
    let port = try #require(SessionTests.tcpPort(in: daemon.log))
    var idle: [Int32] = []
    defer { for fd in idle { close(fd) } }
    for _ in 0..<400 {
      let fd = ts_connect_tcp("127.0.0.1", port)
      if fd >= 0 { idle.append(fd) }
    }
    // The daemon has taken them all (or their backlog): every descriptor it has is in use.
    await eventually("the daemon ran out of descriptors") {
      daemon.log.contains("event=descriptors_exhausted")
    }
    for attempt in 0..<5 {
      #expect(
        SocketClient.get(daemon.socket, "/healthz").status == 200, "Unix socket, try \(attempt)")
      let tcp = SocketClient.getTCP(port: port, "/healthz")
      #expect(SocketClient.status(of: tcp) == 200, "TCP, try \(attempt)")
    }
  }

  /// Sends prefetch rounds of `perRound` items named `prefix` + number, then a load with an
  /// invalid size, whose answer comes after every answer to the rounds (frames are applied in
  /// order). Returns the cost of the items accepted and the number answered `busy`.
  static func announce(
    _ client: ThumbClient, _ log: SessionTests.EventLog, origin: LoopbackOrigin, prefix: String,
    rounds: Range<Int>, perRound: Int = 200
  ) async throws -> (accepted: Int, busy: Int) {
    var costs: [String: Int] = [:]
    for round in rounds {
      let items = (0..<perRound).map { index in
        let name = "\(prefix)-\(round)-\(index)"
        return (item: name, url: origin.url("/held/\(name).png"))
      }
      for entry in items { costs[entry.item] = Self.cost(entry.item, entry.url) }
      try client.prefetch(round: round, items: items, width: 16, height: 16)
    }
    let probe = "probe-\(prefix)-\(rounds.lowerBound)"
    try client.load(
      slot: 1, item: probe, token: rounds.lowerBound, url: origin.url("/x.png"), width: -1,
      height: 16)
    await eventually("the probe answered") {
      log.events.contains {
        if case .error(_, probe, _, "invalid_spec", _) = $0 { true } else { false }
      }
    }
    let busy = Set(
      log.events.compactMap {
        if case .prefetchError(_, let item, "busy") = $0, costs[item] != nil { item } else { nil }
      })
    let accepted = costs.filter { !busy.contains($0.key) }.values.reduce(0, +)
    return (accepted, busy.count)
  }

  /// What PROTOCOL.md says an announced item costs.
  static func cost(_ item: String, _ url: String) -> Int { item.utf8.count + url.utf8.count + 160 }

  @Test(
    "announced prefetch items are bounded per session (2 MiB) and over all sessions (session_memory); releasing gives the room back"
  )
  func sessionMemory() async throws {
    let origin = try LoopbackOrigin { _ in .init(status: 404, holdUntilReleased: true) }.start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start([
      "--cache-dir", "", "--allow-private", "--session-memory", "4MiB",
    ])
    defer { daemon.stop() }
    let perSession = 2 << 20
    // Session a: 12,000 items, some 2.6 MiB: the last ones are busy, the rest fill 2 MiB.
    let a = try ThumbClient(endpoint: .unix(daemon.socket))
    let logA = SessionTests.EventLog(a)
    let first = try await Self.announce(a, logA, origin: origin, prefix: "a", rounds: 0..<60)
    #expect(first.busy > 0)
    #expect(
      first.accepted <= perSession && first.accepted > perSession - 1024, "a holds \(first)")
    // Session b fills the rest of the 4 MiB; session c finds nothing left.
    let b = try ThumbClient(endpoint: .unix(daemon.socket))
    let logB = SessionTests.EventLog(b)
    let second = try await Self.announce(b, logB, origin: origin, prefix: "b", rounds: 0..<60)
    #expect(second.busy > 0)
    #expect(first.accepted + second.accepted <= 4 << 20)
    let c = try ThumbClient(endpoint: .unix(daemon.socket))
    let logC = SessionTests.EventLog(c)
    let third = try await Self.announce(c, logC, origin: origin, prefix: "c", rounds: 0..<1)
    #expect(third.accepted < 4096, "c got room past the bound: \(third)")
    // a releases its rounds: its next round fits whole (frames apply in order).
    for round in 0..<60 { try a.release(round: round) }
    let again = try await Self.announce(a, logA, origin: origin, prefix: "a", rounds: 60..<61)
    #expect(again.busy == 0, "released room not given back: \(again)")
    // b hangs up: its room comes back, and c gets it.
    b.close()
    await logB.finished()
    var round = 1
    await eventually("a closed session's room given back") {
      round += 1
      let answer = try? await Self.announce(
        c, logC, origin: origin, prefix: "c", rounds: round..<round + 1)
      return answer?.busy == 0
    }
    while origin.held > 0 { origin.release() }
    a.close()
    c.close()
  }

  @Test("two Host fields are a 400, and the connection closes")
  func duplicateHost() async throws {
    let daemon = try await TestDaemon.start(["--cache-dir", ""])
    defer { daemon.stop() }
    let response = SocketClient.exchange(
      daemon.socket, Array("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".utf8))
    #expect(SocketClient.status(of: response) == 400)
  }

  @Test(
    "8 clients sending hostile images leave a visible photo answered within 1 s (the median; none past 5 s), in bounded memory"
  )
  func hostileBesideVisible() async throws {
    let inputs = HostileInputs.all
    let photo = Self.photo
    let origin = try LoopbackOrigin { path in
      if path == "/photo.jpg" { return .init(body: photo) }
      let index = Int(path.split(separator: "/")[1]) ?? 0
      return .init(body: inputs[index % inputs.count].bytes)
    }.start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start([
      "--cache-dir", "", "--allow-private", "--negative-cache-seconds", "0",
    ])
    defer { daemon.stop() }
    let baseline = try #require(daemon.residentKiB)
    let stop = Recorder<Bool>()
    let attackers = (0..<8).map { lane in
      Task {
        var round = 0
        while stop.values.isEmpty {
          // A new source every time: nothing comes from a cache.
          let path = "/\(lane * 1000 + round)/input"
          _ = await FetcherDaemonTests.get(
            daemon.socket, FetcherDaemonTests.target(origin.url(path), size: 200))
          round += 1
        }
        return round
      }
    }
    await eventually("attacks under way") { origin.requests.count >= 16 }
    var waits: [Double] = []
    for size in [64, 96, 128, 160, 192] {
      let answer = await FetcherDaemonTests.get(
        daemon.socket,
        FetcherDaemonTests.target(origin.url("/photo.jpg"), size: size) + "&priority=visible")
      #expect(answer.status == 200)
      waits.append(answer.seconds)
    }
    expectPrompt(waits, "the visible photo's answers")
    stop.append(true)
    var attacks = 0
    for task in attackers { attacks += await task.value }
    #expect(attacks >= 16)
    let peak = try #require(daemon.peakResidentKiB)
    #expect(peak - baseline < 192 * 1024, "peak \(peak - baseline) KiB above the baseline")
  }
}
