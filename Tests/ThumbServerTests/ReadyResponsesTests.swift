import Foundation
import ImagePipeline
import Synchronization
import Testing

@testable import Loopback
@testable import TestSupport
@testable import ThumbServer

#if canImport(Glibc)
  import Glibc
#endif

/// Memory hits given again from the loop's table of ready responses: the same bytes as the
/// route makes (but `Date`), and never when the route would answer otherwise: a changed or
/// purged source, another `Accept`, a conditional request, another listener. Driven by hand
/// on a loop that is not running, over real sockets, a real file and a real pipeline, as
/// `ArrivalBoundTests` does.
@Suite("Ready responses")
struct ReadyResponsesTests {
  /// A handler on one end of a socket pair (Unix, or TCP on loopback), the test on the other.
  final class Harness {
    let directory: String
    let photo: String
    let pipeline: ThumbnailPipeline
    let ready: ReadyResponses
    let loop: EventLoop
    let handler: HTTPConnectionHandler
    let connection: LoopConnection
    let peer: Int32
    let encodedURL: String
    let router: Router
    /// Whether the directory is this harness's to remove.
    let owner: Bool

    /// A harness of its own, or another connection of `sharing`'s (its file, pipeline, router
    /// and table).
    init(
      tcp: Bool = false,
      route: (ThumbnailPipeline) -> ThumbnailRoute = {
        ThumbnailRoute(pipeline: $0)
      }, more: [Route] = [], ready: ReadyResponses = ReadyResponses(), sharing: Harness? = nil
    ) throws {
      if let sharing {
        (directory, photo, pipeline, router) = (
          sharing.directory, sharing.photo, sharing.pipeline, sharing.router
        )
        self.ready = sharing.ready
      } else {
        directory =
          URL(fileURLWithPath: TestDaemon.makeDirectory()).resolvingSymlinksInPath().path
        photo = directory + "/photo.jpg"
        try Data(try Corpus.bytes("photo/coil/normal.jpg")).write(to: URL(fileURLWithPath: photo))
        let loader = SourceLoader(
          policy: SourcePolicy(allowedSchemes: ["file"], fileRoots: [directory]))
        pipeline = ThumbnailPipeline(configuration: .init(dataLoader: loader))
        router = Router(routes: [route(pipeline).route] + more)
        self.ready = ready
      }
      owner = sharing == nil
      encodedURL = ("file://" + photo).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
      loop = try EventLoop(limits: ServerLimits(), logger: nil) { _, _ in fatalError("no accepts") }
      handler = HTTPConnectionHandler(
        router: router, upgraders: [], logger: nil, loop: loop,
        hits: HitPath(router: router, ready: self.ready), limits: HTTPLimits(),
        outputLimit: 1 << 20)
      let (mine, theirs) = tcp ? try Self.tcpPair() : Self.unixPair()
      peer = theirs
      connection = LoopConnection(
        id: ConnectionID(value: 1), fd: mine, loop: loop, handler: handler, now: 0)
    }

    deinit {
      loop.closeConnection(connection)
      close(peer)
      if owner { try? FileManager.default.removeItem(atPath: directory) }
    }

    static func unixPair() -> (Int32, Int32) {
      var fds: [Int32] = [0, 0]
      _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds)
      return (fds[0], fds[1])
    }

    /// Two ends of a TCP connection on loopback: the accepted one, and the client's.
    static func tcpPair() throws -> (Int32, Int32) {
      let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
      defer { close(listener) }
      var address = sockaddr_in()
      address.sin_family = sa_family_t(AF_INET)
      address.sin_addr.s_addr = inet_addr("127.0.0.1")
      var length = socklen_t(MemoryLayout<sockaddr_in>.size)
      try withUnsafeMutablePointer(to: &address) { pointer in
        try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
          guard bind(listener, raw, length) == 0, listen(listener, 1) == 0,
            getsockname(listener, raw, &length) == 0
          else { throw POSIXError(.EADDRNOTAVAIL) }
        }
      }
      let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
      let connected = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) }
      }
      guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
      let accepted = accept(listener, nil, nil)
      guard accepted >= 0 else { throw POSIXError(.ECONNREFUSED) }
      _ = fcntl(accepted, F_SETFL, fcntl(accepted, F_GETFL) | O_NONBLOCK)
      return (accepted, client)
    }

    /// The request line's target for the photo at `size`, and `more` query.
    func target(size: Int = 64, _ more: String = "") -> String {
      "/v1/thumbnail?url=\(encodedURL)&w=\(size)&h=\(size)\(more)"
    }

    /// Feeds one request as a read the poll saw arriving (answered at once when it can be),
    /// by `arrived`.
    func send(
      _ target: String, method: String = "GET", headers: [String] = [],
      arrived: ContinuousClock.Instant = .now
    ) {
      let text =
        "\(method) \(target) HTTP/1.1\r\nHost: t\r\n"
        + headers.map { $0 + "\r\n" }.joined() + "\r\n"
      connection.arrivalBound = arrived
      _ = handler.received(Array(text.utf8)[...], on: connection)
    }

    /// Every whole response written so far and not read before.
    func responses() -> [(head: ResponseHead, body: [UInt8])] {
      SocketClient.responses(in: bytes())
    }

    /// The bytes written so far and not read before.
    func bytes() -> [UInt8] { SocketBytes.unread(on: peer) }

    /// Makes the thumbnail at `target` a memory hit, through the router.
    func warm(_ target: String, headers: [String] = []) async throws {
      var parser = HTTPRequestParser()
      let text =
        "GET \(target) HTTP/1.1\r\nHost: t\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n"
      let request = try parser.feed(Array(text.utf8))[0]
      #expect(await router.respond(to: request).0.status == 200)
    }
  }

  /// A head's fields without `Date`, which is renewed every second.
  private static func fields(_ head: ResponseHead) -> [String] {
    head.fields.filter { $0.name.lowercased() != "date" }.map { "\($0.name): \($0.value)" }
  }

  @Test("a repeated memory hit is written from the table: the route's bytes, checks and counts")
  func repeatedHit() async throws {
    let harness = try Harness()
    let target = harness.target()
    try await harness.warm(target)
    harness.send(target)
    let first = harness.responses()
    #expect(first.count == 1 && first[0].head.status == 200)
    #expect(harness.ready.count == 1 && harness.ready.reused == 0)
    let hitsBefore = harness.pipeline.metrics.snapshot().memoryHits
    harness.send(target)
    harness.send(target, headers: ["User-Agent: another", "Accept-Encoding: gzip"])
    let again = harness.responses()
    #expect(harness.ready.reused == 2, "the kept response was not given again")
    #expect(again.count == 2)
    for response in again {
      #expect(response.head.status == 200)
      #expect(Self.fields(response.head) == Self.fields(first[0].head))
      #expect(response.body == first[0].body)
      #expect(response.head.value("date") != nil)
    }
    // Each was checked against the cache and counted as a hit, as the route does.
    #expect(harness.pipeline.metrics.snapshot().memoryHits == hitsBefore + 2)
    #expect(harness.router.statuses.snapshot[200] == 4)
  }

  @Test(
    "a head repeated byte for byte is known and not parsed again; known heads are bounded and leave with their entry"
  )
  func knownHeads() async throws {
    let harness = try Harness()
    let target = harness.target()
    try await harness.warm(target)
    harness.send(target)
    let first = harness.responses()
    #expect(first.count == 1 && harness.ready.knownHeads == 1 && harness.ready.headsFound == 0)
    harness.send(target)
    // Another User-Agent: parsed, answered from the entry, and known from then on.
    harness.send(target, headers: ["User-Agent: another"])
    harness.send(target, headers: ["User-Agent: another"])
    let again = harness.responses()
    #expect(again.count == 3)
    for response in again {
      #expect(Self.fields(response.head) == Self.fields(first[0].head))
      #expect(response.body == first[0].body)
    }
    #expect(harness.ready.reused == 3)
    #expect(harness.ready.headsFound == 2 && harness.ready.knownHeads == 2)

    // Known only byte for byte, and only under the limits it was parsed under.
    let head = Array("GET \(target) HTTP/1.1\r\nHost: t".utf8)
    #expect(harness.ready.request(for: head[...], limits: HTTPLimits()) != nil)
    #expect(harness.ready.request(for: head[...], limits: HTTPLimits(maxHeaders: 1)) == nil)
    #expect(
      harness.ready.request(
        for: Array("GET \(target) HTTP/1.1\r\nHost: T".utf8)[...], limits: HTTPLimits()) == nil)
    #expect(harness.ready.request(for: head.dropLast(), limits: HTTPLimits()) == nil)

    // At most `headsPerEntry` per entry.
    for agent in 0..<8 { harness.send(target, headers: ["User-Agent: agent \(agent)"]) }
    #expect(harness.responses().count == 8)
    #expect(harness.ready.knownHeads == ReadyResponses.headsPerEntry)

    // After a purge the entry goes, and its heads with it: the same bytes are parsed and go to
    // the route, which makes the thumbnail anew.
    #expect(await harness.pipeline.purge("file://" + harness.photo) >= 1)
    let found = harness.ready.headsFound
    harness.send(target)
    #expect(harness.ready.headsFound == found + 1, "the head was known until the entry went")
    #expect(harness.responses().isEmpty)
    #expect(harness.ready.count == 0 && harness.ready.knownHeads == 0)
    harness.send(target)
    #expect(harness.ready.headsFound == found + 1)
  }

  @Test(
    "a request that arrived no later than one whose check found the kept response shares that check; never after a removal from the cache or for one that arrived later"
  )
  func sharedChecks() async throws {
    // One wall-clock second throughout: a check is shared only within its second.
    let harness = try Harness(ready: ReadyResponses(second: { 1 }))
    let target = harness.target()
    try await harness.warm(target)
    let early = ContinuousClock.now
    harness.send(target, arrived: early)
    let first = harness.responses()
    #expect(first.count == 1 && harness.ready.count == 1)
    // Checked by the route for this one, then shared by two that arrived no later.
    let pass = ContinuousClock.now
    harness.send(target, arrived: pass)
    #expect(harness.ready.sharedChecks == 0)
    let hits = harness.pipeline.metrics.snapshot().memoryHits
    harness.send(target, arrived: pass)
    harness.send(target, arrived: early)
    #expect(harness.ready.sharedChecks == 2)
    let answers = harness.responses()
    #expect(answers.count == 3)
    for answer in answers {
      #expect(Self.fields(answer.head) == Self.fields(first[0].head))
      #expect(answer.body == first[0].body)
    }
    // Counted as the hits they are.
    #expect(harness.pipeline.metrics.snapshot().memoryHits == hits + 2)
    #expect(harness.router.statuses.snapshot[200] == 5)

    // One that arrived later checks for itself, and finds the file changed.
    try Data(try Corpus.bytes("photo/coil/large.jpg")).write(
      to: URL(fileURLWithPath: harness.photo))
    harness.send(target, arrived: pass)
    #expect(harness.ready.sharedChecks == 3, "one that arrived before the change shares")
    #expect(harness.responses().count == 1)
    harness.send(target)
    #expect(harness.ready.sharedChecks == 3)
    #expect(harness.responses().isEmpty, "a later request was given the kept picture")
    #expect(harness.ready.count == 0)
  }

  @Test("a check is shared only within the wall-clock second it was made in")
  func sharedWithinItsSecond() async throws {
    let clock = Clock()
    let harness = try Harness(ready: ReadyResponses(second: { clock.now }))
    let target = harness.target()
    try await harness.warm(target)
    harness.send(target)
    let pass = ContinuousClock.now
    harness.send(target, arrived: pass)
    clock.now += 1
    harness.send(target, arrived: pass)
    #expect(harness.ready.sharedChecks == 0)
    harness.send(target, arrived: pass)
    #expect(harness.ready.sharedChecks == 1)
    #expect(harness.responses().count == 4)
  }

  @Test("no check is shared once the thumbnail may have left the cache")
  func noSharingAfterRemoval() async throws {
    // One wall-clock second throughout: a check is shared only within its second.
    let harness = try Harness(ready: ReadyResponses(second: { 1 }))
    let target = harness.target()
    try await harness.warm(target)
    harness.send(target)
    let pass = ContinuousClock.now
    harness.send(target, arrived: pass)
    #expect(harness.responses().count == 2)
    // Another thumbnail leaving the cache is a removal too: nothing is shared after it.
    try await harness.warm(harness.target(size: 32))
    #expect(await harness.pipeline.purge("file://" + harness.photo) >= 1)
    harness.send(target, arrived: pass)
    #expect(harness.ready.sharedChecks == 0)
    #expect(harness.responses().isEmpty, "a purged thumbnail was given")
  }

  @Test("a kept response is not given once its file changed: the change is found and made anew")
  func changedFile() async throws {
    let harness = try Harness()
    let target = harness.target()
    try await harness.warm(target)
    harness.send(target)
    #expect(harness.responses().count == 1 && harness.ready.count == 1)
    try Data(try Corpus.bytes("photo/coil/large.jpg")).write(
      to: URL(fileURLWithPath: harness.photo))
    harness.send(target)
    // Nothing at once: the request went to be made anew (a task; this loop is not running).
    #expect(harness.responses().isEmpty)
    #expect(harness.ready.reused == 0 && harness.ready.count == 0)
    #expect(harness.pipeline.metrics.snapshot().sourceChanges == 1)
  }

  @Test(
    "the same options in another order share one kept response; another option does not; a change ends it for every order"
  )
  func reorderedTargetsShare() async throws {
    let harness = try Harness()
    let url = harness.encodedURL
    let first = "/v1/thumbnail?url=\(url)&w=64&h=64&rotate=90&blur=2"
    let reordered = "/v1/thumbnail?blur=2&h=64&rotate=90&w=64&url=\(url)"
    let other = "/v1/thumbnail?url=\(url)&w=64&h=64&rotate=180&blur=2"
    try await harness.warm(first)
    try await harness.warm(other)
    harness.send(first)
    harness.send(reordered)
    var answers = harness.responses()
    #expect(answers.count == 2 && answers.allSatisfy { $0.head.status == 200 })
    #expect(answers.count == 2 && answers[1].body == answers[0].body)
    #expect(answers.count == 2 && Self.fields(answers[1].head) == Self.fields(answers[0].head))
    #expect(harness.ready.count == 1 && harness.ready.aliasCount == 1)
    #expect(harness.ready.sharedAcrossTargets == 1 && harness.ready.reused == 0)
    // The reordered target is now found in the table before any routing.
    harness.send(reordered)
    #expect(harness.responses().count == 1 && harness.ready.reused == 1)
    // Another option is another answer: an entry of its own, never the first's bytes.
    harness.send(other)
    answers = harness.responses()
    #expect(answers.count == 1 && answers.first?.body != nil)
    #expect(harness.ready.count == 2 && harness.ready.aliasCount == 1)
    let otherBody = harness.ready.entry(target: other)?.response.body
    #expect(otherBody != nil && otherBody != harness.ready.entry(target: first)?.response.body)
    // A changed file: the reordered target finds it, and neither order is kept any more.
    try Data(try Corpus.bytes("photo/coil/large.jpg")).write(
      to: URL(fileURLWithPath: harness.photo))
    harness.send(reordered)
    #expect(harness.responses().isEmpty, "made anew, not given from the table")
    #expect(harness.ready.entry(target: first) == nil && harness.ready.aliasCount == 0)
  }

  @Test("a kept response is not given after a purge")
  func purged() async throws {
    let harness = try Harness()
    let target = harness.target()
    try await harness.warm(target)
    harness.send(target)
    #expect(harness.responses().count == 1 && harness.ready.count == 1)
    #expect(await harness.pipeline.purge("file://" + harness.photo) >= 1)
    harness.send(target)
    #expect(harness.responses().isEmpty)
    #expect(harness.ready.reused == 0 && harness.ready.count == 0)
  }

  @Test("headers that choose the answer are part of the key: Accept, If-None-Match, the client")
  func keyedHeaders() async throws {
    let harness = try Harness(route: {
      ThumbnailRoute(
        pipeline: $0, parameters: ThumbnailParameters(defaultFormat: .auto, accepted: .basic))
    })
    let target = harness.target()
    try await harness.warm(target, headers: ["Accept: image/webp"])
    try await harness.warm(target)
    harness.send(target, headers: ["Accept: image/webp"])
    #expect(harness.responses().map { $0.head.value("content-type") } == ["image/webp"])
    // Another Accept: the route answers (JPEG), not the kept WebP.
    harness.send(target)
    let jpeg = harness.responses()
    #expect(jpeg.map { $0.head.value("content-type") } == ["image/jpeg"])
    #expect(harness.ready.reused == 0)
    // A conditional request with the kept response's validator: 304 from the route.
    let etag = try #require(jpeg.first?.head.value("etag"))
    harness.send(target, headers: ["If-None-Match: \(etag)"])
    #expect(harness.responses().map(\.head.status) == [304])
    #expect(harness.ready.reused == 0)
    // A named client is another key too; then the same again comes from the table.
    harness.send(target, headers: ["X-Thumbd-Client: list-1"])
    harness.send(target, headers: ["X-Thumbd-Client: list-1"])
    #expect(harness.responses().map(\.head.status) == [200, 200])
    #expect(harness.ready.reused == 1)
  }

  @Test("HEAD and Connection: close answered from a kept response keep their own framing")
  func headAndClose() async throws {
    let harness = try Harness()
    let target = harness.target()
    try await harness.warm(target)
    harness.send(target)
    let full = harness.responses()[0]
    harness.send(target, method: "HEAD")
    // A head alone: everything after its blank line would be a body.
    let bytes = harness.bytes()
    #expect(harness.ready.reused == 1)
    let end = try #require(
      bytes.indices.first { bytes[$0...].starts(with: Array("\r\n\r\n".utf8)) })
    #expect(end + 4 == bytes.count, "HEAD was answered with a body")
    let head = try #require(SocketClient.head(of: bytes))
    #expect(head.status == 200)
    #expect(head.value("content-length") == String(full.body.count))
    // A closing request's answer says so (made here: the handler would close the socket).
    var parser = HTTPRequestParser()
    let closing = try parser.feed(
      Array("GET \(target) HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".utf8))[0]
    let entry = try #require(harness.ready.entry(for: closing))
    let wire = harness.ready.wire(entry, for: closing, keepAlive: closing.keepAlive)
    let answer = try #require(SocketClient.responses(in: wire.head + wire.body).first)
    #expect(answer.head.value("connection") == "close")
    #expect(answer.body == full.body)
  }

  @Test("a response kept for the Unix socket is not given over TCP, where unsigned is refused")
  func otherListener() async throws {
    let local = try Harness(route: {
      ThumbnailRoute(pipeline: $0, refusesUnsignedOverNetwork: true)
    })
    let target = local.target()
    try await local.warm(target)
    local.send(target)
    #expect(local.responses().map(\.head.status) == [200])
    #expect(local.ready.count == 1)
    // The same table and target, over TCP: refused, as the route refuses it.
    let remote = try Harness(tcp: true, sharing: local)
    remote.send(target)
    #expect(remote.responses().map(\.head.status) == [403])
    local.send(target)
    #expect(local.responses().map(\.head.status) == [200])
    #expect(local.ready.reused == 1)
  }

  @Test("a Date from another second is renewed in the table")
  func dateRenewed() async throws {
    let clock = Clock()
    let harness = try Harness(ready: ReadyResponses(second: { clock.now }))
    let target = harness.target()
    try await harness.warm(target)
    harness.send(target)
    #expect(harness.ready.entry(target: target)?.second == 0)
    clock.now = 1
    harness.send(target)
    #expect(harness.responses().count == 2)
    #expect(harness.ready.reused == 1)
    #expect(harness.ready.entry(target: target)?.second == 1)
  }

  final class Clock: @unchecked Sendable {
    var now = 0
  }

  @Test("the table holds at most its entries and bytes")
  func bounded() {
    let ready = ReadyResponses(maxEntries: 8, maxBytes: 64 << 10)
    var parser = HTTPRequestParser()
    for i in 0..<100 {
      let request = try! parser.feed(Array("GET /t/\(i) HTTP/1.1\r\nHost: t\r\n\r\n".utf8))[0]
      var response = HTTPResponse(
        status: 200, headers: [("Content-Type", "image/jpeg")],
        body: [UInt8](repeating: 7, count: i % 2 == 0 ? 100 : 7_000))
      response.reuse = ResponseReuse { _ in nil }
      ready.keep(response, .memory, for: request, reads: [])
      #expect(ready.count <= 8 && ready.bytes <= 64 << 10)
    }
    // One larger than an eighth of the bytes is never kept.
    let big = try! parser.feed(Array("GET /big HTTP/1.1\r\nHost: t\r\n\r\n".utf8))[0]
    var response = HTTPResponse(status: 200, body: [UInt8](repeating: 1, count: 9 << 10))
    response.reuse = ResponseReuse { _ in nil }
    ready.keep(response, .memory, for: big, reads: [])
    #expect(ready.entry(target: "/big") == nil)
    // And a response that does not say how it may be reused is never kept.
    let plain = try! parser.feed(Array("GET /plain HTTP/1.1\r\nHost: t\r\n\r\n".utf8))[0]
    ready.keep(HTTPResponse(status: 200), nil, for: plain, reads: [])
    #expect(ready.entry(target: "/plain") == nil)
  }

  /// A route of a test's own that reads one header no route of thumbd reads: its answer is
  /// that header's value, kept for later requests as a memory hit's is (checked again by
  /// `again`, which counts its calls).
  final class TintRoute: Sendable {
    let checked = Atomic<Int>(0)

    func route(reading reads: Set<String>) -> Route {
      Route(path: "/tint", reads: reads) { [self] request in
        let tint = request.header("x-tint") ?? "none"
        var response = HTTPResponse(
          status: 200, headers: [("Content-Type", "text/plain")], body: Array(tint.utf8))
        response.reuse = ResponseReuse { later in
          self.checked.add(1, ordering: .relaxed)
          // Still the answer only for the same tint (which the key should already ensure).
          return later.header("x-tint") ?? "none" == tint
            ? nil : .now(HTTPResponse(status: 500), nil)
        }
        return .now(response, nil)
      }
    }
  }

  @Test("a route that reads a new header needs only to say so: its hits are keyed by it")
  func newHeaderKeyed() async throws {
    let tint = TintRoute()
    let harness = try Harness(more: [tint.route(reading: ["X-Tint"])])
    harness.send("/tint", headers: ["X-Tint: red"])
    harness.send("/tint", headers: ["X-Tint: blue"])
    harness.send("/tint", headers: ["X-Tint: blue", "User-Agent: another"])
    harness.send("/tint", headers: ["X-Tint: red"])
    harness.send("/tint", headers: ["X-Tint: red"])
    // Each tint gets its own answer: blue is not served red's kept bytes, nor red blue's. A
    // header the route does not read (User-Agent) keys nothing, so the second blue is a hit.
    #expect(
      harness.responses().map { String(decoding: $0.body, as: UTF8.self) } == [
        "red", "blue", "blue", "red", "red",
      ])
    #expect(harness.ready.reused == 2)
    #expect(
      tint.checked.load(ordering: .relaxed) == 2, "a hit of another tint reached the route's check")
  }

  @Test("a route sees only the headers it says it reads")
  func routeSeesWhatItReads() async throws {
    let harness = try Harness(more: [TintRoute().route(reading: [])])
    harness.send("/tint", headers: ["X-Tint: red"])
    #expect(harness.responses().map { String(decoding: $0.body, as: UTF8.self) } == ["none"])
  }
}
