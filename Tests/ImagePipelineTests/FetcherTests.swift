import Foundation
import Synchronization
import Testing

@testable import ImagePipeline
@testable import Loopback
@testable import TestSupport

/// Real HTTP through libcurl against a real origin on loopback: caps, deadlines, redirects,
/// retries, keep-alive, cancellation and the address rules, each finding of the outside test
/// reproduced.
@Suite("Fetchers")
struct FetcherTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  static func origin() throws -> LoopbackOrigin {
    try LoopbackOrigin { path in
      switch path {
      case "/photo.jpg": return .init(body: photo)
      case "/missing": return .init(status: 404, body: Array("no".utf8))
      case "/huge": return .init(streamedLength: 1 << 30, pauseAfterBytes: 4 << 20)
      case "/huge-unsized":
        return .init(streamedLength: 1 << 30, omitLength: true, pauseAfterBytes: 4 << 20)
      case "/endless": return .init(endless: true, omitLength: true)
      case "/endless-chunked-1": return .init(endless: true, chunkSize: 1)
      case "/declared-10g": return .init(endless: true, declaredLength: 10 << 30)
      case "/redirect-endless":
        return .init(
          status: 302, headers: ["Location": "/photo.jpg"], endless: true, omitLength: true)
      case "/two-lengths":
        return .init(
          rawHeaderLines: ["Content-Length: 10", "Content-Length: 12"],
          body: Array(repeating: 1, count: 12))
      case "/slow": return .init(holdUntilStopped: true)
      case "/to-private":
        return .init(status: 302, headers: ["Location": "http://10.255.0.1/x.jpg"])
      case "/to-photo": return .init(status: 302, headers: ["Location": "/photo.jpg"])
      case "/to-file": return .init(status: 302, headers: ["Location": "file:///etc/passwd"])
      case "/to-ftp": return .init(status: 301, headers: ["Location": "ftp://127.0.0.1/x.jpg"])
      case "/loop": return .init(status: 302, headers: ["Location": "/loop"])
      default:
        if path.hasPrefix("/hop/") {
          // /hop/N redirects to /hop/N-1 ... /hop/0 answers the photo.
          let n = Int(path.dropFirst(5)) ?? 0
          return n == 0
            ? .init(body: photo) : .init(status: 307, headers: ["Location": "/hop/\(n - 1)"])
        }
        if path.hasPrefix("/item/") { return .init(body: Array(path.utf8)) }
        return .init(status: 500)
      }
    }.start()
  }

  /// A body larger than the room held for it stops at its head and is asked again once the
  /// room is there; a source whose declared size grows on every request is asked again only
  /// `maxWidenings` times, then taken as it comes.
  @Test("a body larger than its room is asked again after widening, at most maxWidenings times")
  func wideningIsBounded() async throws {
    // Each request's body is 100 KiB larger than the one before.
    let origin = try LoopbackOrigin.answering { request in
      .init(body: Array(repeating: 7, count: (request.index + 1) * 100 << 10))
    }.start()
    defer { origin.stop() }
    let widened = Mutex<[Int]>([])
    let counted = Atomic<Int>(0)
    let meter = ByteMeter(
      room: 50 << 10, widen: { bytes in widened.withLock { $0.append(bytes) } },
      { counted.add($0, ordering: .relaxed) })
    // Four exchanges of a few hundred KiB: a deadline far past them, since the test is about
    // the count (the whole suite on two cores once held this one past the default 40 s).
    let response = try await Self.loader(Self.loopbackPolicy(), Self.limits(timeout: 150)).load(
      SourceRequest(url: origin.url("/growing.jpg"), meter: meter))
    guard case .modified(let bytes, _) = response else {
      Issue.record("no body")
      return
    }
    let max = HTTPFetcher.maxWidenings
    #expect(widened.withLock { $0 } == (1...max).map { $0 * 100 << 10 })
    #expect(origin.requestCounts["/growing.jpg"] == max + 1)
    #expect(bytes.count == (max + 1) * 100 << 10)
    #expect(counted.load(ordering: .relaxed) == bytes.count)
  }

  /// Loopback is allowed by network for these tests; every other non-public address stays
  /// refused.
  static func loopbackPolicy() -> SourcePolicy { SourcePolicy(allowedNetworks: IPNetwork.loopback) }

  static func limits(
    maxBytes: Int = 8 << 20, timeout: Double = 20, redirects: Int = 3, retries: Int = 2
  ) -> FetchLimits {
    FetchLimits(
      maxSourceBytes: maxBytes, connectTimeout: timeout, totalTimeout: timeout * 2,
      maxRedirects: redirects, retries: retries, retryBackoff: 0.01)
  }

  static func loader(
    _ policy: SourcePolicy = loopbackPolicy(), _ limits: FetchLimits = limits(),
    resolver: any NameResolving = SystemResolver()
  ) -> SourceLoader {
    SourceLoader(policy: policy, limits: limits, resolver: resolver)
  }

  private func fetch(_ url: String, _ loader: SourceLoader) async -> Result<[UInt8], FetchError> {
    do {
      return .success(try await loader.loadData(for: url))
    } catch let error as FetchError {
      return .failure(error)
    } catch {
      Issue.record("unexpected error \(error)")
      return .failure(.transport("\(error)"))
    }
  }

  private func fetch(
    _ url: String, _ policy: SourcePolicy = loopbackPolicy(), _ limits: FetchLimits = limits()
  ) async -> Result<[UInt8], FetchError> {
    await fetch(url, Self.loader(policy, limits))
  }

  @Test("a successful fetch returns the exact bytes, also through a redirect")
  func success() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    #expect(try await fetch(origin.url("/photo.jpg")).get() == Self.photo)
    #expect(try await fetch(origin.url("/to-photo")).get() == Self.photo)
  }

  @Test(
    "a redirect to file: or another scheme is refused as not allowed, even where file roots are",
    arguments: ["/to-file", "/to-ftp"])
  func redirectToOtherScheme(path: String) async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    let policy = SourcePolicy(
      allowedSchemes: ["http", "https", "file", "ftp"], allowedNetworks: IPNetwork.loopback,
      fileRoots: ["/etc"])
    let result = await fetch(origin.url(path), policy)
    guard case .failure(.notAllowed(let reason)) = result else {
      Issue.record("\(path): \(result)")
      return
    }
    #expect(reason.contains("redirect"))
  }

  @Test("404 gives httpStatus(404) and is fetched once: 4xx are never retried")
  func notFound() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    await #expect(throws: FetchError.httpStatus(404)) {
      try await fetch(origin.url("/missing")).get()
    }
    #expect(origin.requests == ["/missing"])
  }

  @Test("a body over the cap fails before it is all read", arguments: ["/huge", "/huge-unsized"])
  func bodyCap(path: String) async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    await #expect(throws: FetchError.tooLarge(limit: 1 << 20)) {
      try await fetch(origin.url(path), Self.loopbackPolicy(), Self.limits(maxBytes: 1 << 20)).get()
    }
    #expect(origin.requests == [path])
    // The origin stops after 4 MiB of its 1 GiB until released, so the fetch can only have
    // failed on the cap while the body streamed.
    #expect(origin.liveBytes(for: path) <= 4 << 20)
    origin.release()
  }

  @Test(
    "endless bodies and endless 1-byte chunks stop at the cap, at most 1 MiB past it",
    arguments: ["/endless", "/endless-chunked-1"])
  func endlessBodies(path: String) async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    let cap = 1 << 20
    await #expect(throws: FetchError.tooLarge(limit: cap)) {
      try await fetch(origin.url(path), Self.loopbackPolicy(), Self.limits(maxBytes: cap)).get()
    }
    // The origin's own count, once its writes fail: what it pushed beyond the cap.
    await eventually("origin stopped writing") { origin.bytesSent(for: path) != nil }
    #expect((origin.bytesSent(for: path) ?? .max) <= cap + (1 << 20))
  }

  @Test("a declared 10 GiB length is refused before the body")
  func declaredLength() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    await #expect(throws: FetchError.tooLarge(limit: 8 << 20)) {
      try await fetch(origin.url("/declared-10g")).get()
    }
    await eventually("origin stopped writing") { origin.bytesSent(for: "/declared-10g") != nil }
    #expect((origin.bytesSent(for: "/declared-10g") ?? .max) <= 1 << 20)
  }

  @Test("a redirect's endless body is never read: the next hop is fetched at once")
  func redirectWithEndlessBody() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    #expect(try await fetch(origin.url("/redirect-endless")).get() == Self.photo)
    await eventually("origin stopped writing") { origin.bytesSent(for: "/redirect-endless") != nil }
    #expect((origin.bytesSent(for: "/redirect-endless") ?? .max) <= 1 << 20)
  }

  @Test("gzip bombs are never decompressed: the cap counts wire bytes")
  func gzipBombs() async throws {
    let small = try await HostileInputs.gzipBomb(members: 16)  // 1 GiB of zeros in 1 MB
    let large = try await HostileInputs.gzipBomb(members: 160)  // 10 GiB in 10 MB
    let origin = try LoopbackOrigin { path in
      .init(headers: ["Content-Encoding": "gzip"], body: path == "/small.gz" ? small : large)
    }.start()
    defer { origin.stop() }
    // Returned as the compressed bytes they are (and then no image decoder will take them).
    #expect(try await fetch(origin.url("/small.gz")).get() == small)
    let cap = 1 << 20
    await #expect(throws: FetchError.tooLarge(limit: cap)) {
      try await fetch(origin.url("/large.gz"), Self.loopbackPolicy(), Self.limits(maxBytes: cap))
        .get()
    }
    // At most 1 MiB read past the cap: the origin's own count once its writes fail.
    await eventually("origin stopped writing") { origin.bytesSent(for: "/large.gz") != nil }
    #expect((origin.bytesSent(for: "/large.gz") ?? .max) <= cap + (1 << 20))
  }

  @Test("two different Content-Length values are a bad response")
  func conflictingLengths() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    let result = await fetch(origin.url("/two-lengths"))
    guard case .failure(let error) = result else {
      Issue.record("a response with two lengths was accepted")
      return
    }
    #expect(error.kind == "bad_response" || error.kind == "transport")
  }

  @Test("a slow origin times out on our own deadline")
  func slowOrigin() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    let result = await fetch(origin.url("/slow"), Self.loopbackPolicy(), Self.limits(timeout: 0.3))
    guard case .failure(.timedOut) = result else {
      Issue.record("expected a timeout, got \(result)")
      return
    }
  }

  @Test("a redirect to a refused address is refused, and redirect loops end")
  func redirects() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    // Loopback is allowed, other private ranges are not: the 10/8 hop must be refused before
    // any connection is attempted.
    #expect(try await fetch(origin.url("/photo.jpg")).get() == Self.photo)
    let result = await fetch(origin.url("/to-private"))
    guard case .failure(.notAllowed) = result else {
      Issue.record("redirect to 10.255.0.1 was not refused: \(result)")
      return
    }
    await #expect(throws: FetchError.tooManyRedirects(3)) {
      try await fetch(origin.url("/loop")).get()
    }
  }

  @Test("more than 20 redirects are followed when allowed, each one checked")
  func manyRedirects() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    // What is tested is the count, not the speed: 26 round trips in a row, each resumed on a
    // cooperative pool the parallel suites keep busy, passed the 40 s default under CI load.
    let limits = Self.limits(timeout: 120, redirects: 25)
    #expect(
      try await fetch(origin.url("/hop/25"), Self.loopbackPolicy(), limits).get() == Self.photo)
    await #expect(throws: FetchError.tooManyRedirects(25)) {
      try await fetch(origin.url("/hop/26"), Self.loopbackPolicy(), limits).get()
    }
  }

  @Test("private addresses are refused unless configured, by resolved address")
  func privateAddresses() async throws {
    let policy = SourcePolicy()
    for url in [
      "http://127.0.0.1/x.jpg", "http://localhost/x.jpg", "http://[::1]/x.jpg",
      "http://[::ffff:10.0.0.1]/x.jpg", "http://169.254.169.254/latest", "http://100.64.1.1/",
      "http://192.168.1.1/", "http://[fd00::1]/", "http://images.localhost/x.jpg",
      "http://a.b.LOCALHOST./x.jpg", "http://[::ffff:0:7f00:1]/", "http://[64:ff9b:1::7f00:1]/",
      "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "http://[fe80::200:5efe:7f00:1]/",
      "http://[2002:7f00:1::1]/", "http://[64:ff9b::a9fe:a9fe]/",
    ] {
      let result = await fetch(url, policy)
      guard case .failure(.notAllowed) = result else {
        Issue.record("\(url) was not refused: \(result)")
        continue
      }
    }
  }

  @Test("localhost names are refused before any lookup, whatever DNS would answer")
  func localhostNames() async throws {
    let resolver = RecordingResolver { _ in [.v4(93, 184, 216, 34)] }
    for url in ["http://localhost/x", "http://cdn.localhost/x", "http://x.localhost./y"] {
      let result = await fetch(url, Self.loader(SourcePolicy(), resolver: resolver))
      guard case .failure(.notAllowed) = result else {
        Issue.record("\(url) was not refused: \(result)")
        continue
      }
    }
    #expect(resolver.lookups.isEmpty)
  }

  @Test("URL user info is refused, never sent as credentials")
  func userInfo() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    let result = await fetch("http://user:secret@127.0.0.1:\(origin.port)/photo.jpg")
    guard case .failure(.invalidURL) = result else {
      Issue.record("user info was accepted: \(result)")
      return
    }
    #expect(origin.requests.isEmpty)
  }

  @Test("a name whose answers change is resolved once per attempt: the checked addresses are used")
  func rebindingAtLibraryLevel() async throws {
    // A listener that counts connections: the rebound answer points at it.
    let trap = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { trap.stop() }
    let resolver = RecordingResolver { count in
      // First a "public" answer, then loopback: what a rebinding name does.
      count == 0 ? [.v4(198, 51, 100, 7)] : [.v4(127, 0, 0, 1)]
    }
    // 198.51.100.0/24 is allowed here so the first answer passes; loopback is not allowed.
    let policy = SourcePolicy(allowedNetworks: [IPNetwork("198.51.100.0/24")!])
    let loader = Self.loader(policy, Self.limits(timeout: 0.5, retries: 2), resolver: resolver)
    for _ in 0..<5 {
      _ = await fetch("http://rebind.test:\(trap.port)/photo.jpg", loader)
    }
    #expect(trap.connections == 0, "the loopback listener was reached")
    #expect(resolver.lookups.count >= 2)
  }

  @Test(
    "every refused address class is refused at connect time, not only at lookup",
    arguments: [
      "127.0.0.1", "::1", "::ffff:127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1",
      "169.254.169.254", "100.64.0.1", "64:ff9b::7f00:1", "64:ff9b:1::7f00:1",
      "2002:7f00:1::1", "2001:0:4136:e378:8000:63bf:80ff:fffe", "::ffff:0:7f00:1",
      "fd00:ec2::254",
    ])
  func refusedAtConnect(address text: String) async throws {
    let trap = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { trap.stop() }
    let address = try #require(IPAddress(text))
    let policy = SourcePolicy()
    #expect(!policy.allows(address))
    // The transport is handed the address directly, as if a lookup had slipped it through:
    // the connect-time check alone must stop it.
    let transport = try CurlTransport()
    let collector = BodyCollector(limit: 1 << 20)
    let request = TransportRequest(
      url: try SourceURL("http://origin.test:\(trap.port)/photo.jpg"), addresses: [address],
      allowAddress: { policy.allows($0) }, headTimeout: 2, totalTimeout: 2, maxBodyBytes: 1 << 20)
    let end = await withCheckedContinuation { continuation in
      collector.onFinish(continuation)
      _ = transport.start(request, receiver: collector)
    }
    #expect(end == TransportEnd.failed(.addressRefused, end.message))
    #expect(trap.connections == 0)
    #expect(transport.connectionsOpened == 0)
  }

  @Test("an origin failing twice with 503 answers after backoff; Retry-After is honoured")
  func retries() async throws {
    let origin = try LoopbackOrigin.answering { request in
      switch request.path {
      case "/flaky.jpg":
        return request.index < 2 ? .init(status: 503) : .init(body: Self.photo)
      case "/later.jpg":
        return request.index < 1
          ? .init(status: 429, headers: ["Retry-After": "1"]) : .init(body: Self.photo)
      case "/far.jpg":
        return .init(status: 503, headers: ["Retry-After": "3600"])
      default:
        return .init(status: 404)
      }
    }.start()
    defer { origin.stop() }
    // A deadline far past the test's own steps: under CI's load the three attempts once took
    // longer than the default 40 s, and the fetch rightly answered with its last 503 rather than
    // wait past its deadline (which `far.jpg` below still tests, at 300 s against 3600).
    let loader = Self.loader(Self.loopbackPolicy(), Self.limits(timeout: 150))
    #expect(try await fetch(origin.url("/flaky.jpg"), loader).get() == Self.photo)
    #expect(origin.requests.filter { $0 == "/flaky.jpg" }.count == 3)
    let started = ContinuousClock.now
    #expect(try await fetch(origin.url("/later.jpg"), loader).get() == Self.photo)
    #expect(started.duration(to: .now) >= .seconds(1), "Retry-After: 1 was not waited for")
    // A Retry-After past the deadline is not waited for: the error comes at once.
    let farStart = ContinuousClock.now
    await #expect(throws: FetchError.httpStatus(503)) {
      try await fetch(origin.url("/far.jpg"), loader).get()
    }
    #expect(farStart.duration(to: .now) < .seconds(10))
    #expect(origin.requests.filter { $0 == "/far.jpg" }.count == 1)
    #expect(loader.counters.retries.load(ordering: .relaxed) == 3)
  }

  @Test("200 sequential fetches from one origin use at most origin_connections connections")
  func keepAlive() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    let transport = try CurlTransport(options: .init(connectionsPerHost: 2))
    let loader = SourceLoader(
      policy: Self.loopbackPolicy(), limits: Self.limits(), transport: transport)
    for index in 0..<200 {
      #expect(
        try await fetch(origin.url("/item/\(index)"), loader).get() == Array("/item/\(index)".utf8))
    }
    #expect(origin.connections <= 2)
    #expect(origin.requests.count == 200)
  }

  @Test("cancelling a fetch closes the connection: the origin sends at most 1 MiB more")
  func cancelStopsTheDownload() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    let loader = Self.loader(Self.loopbackPolicy(), Self.limits(maxBytes: 1 << 30))
    let task = Task { try await loader.loadData(for: origin.url("/endless")) }
    await eventually("1 MiB received") { origin.liveBytes(for: "/endless") >= 1 << 20 }
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    // The call returned after the connection was closed: what the origin writes from here on
    // is bounded by the socket buffers, then its writes fail.
    let atHangUp = origin.liveBytes(for: "/endless")
    await eventually("origin stopped writing") { origin.bytesSent(for: "/endless") != nil }
    let total = origin.bytesSent(for: "/endless") ?? .max
    #expect(total <= atHangUp + (1 << 20))
  }

  @Test(
    "address classification",
    arguments: [
      ("8.8.8.8", true), ("1.1.1.1", true), ("127.0.0.1", false), ("10.1.2.3", false),
      ("172.16.0.1", false), ("172.32.0.1", true), ("192.168.0.1", false), ("100.64.0.1", false),
      ("100.128.0.1", true), ("169.254.1.1", false), ("0.0.0.0", false), ("224.0.0.1", false),
      ("::1", false), ("::", false), ("::ffff:127.0.0.1", false), ("::ffff:8.8.8.8", true),
      ("64:ff9b::a00:1", false), ("2002:c0a8:0101::1", false), ("fe80::1", false),
      ("fc00::1", false), ("2001:4860:4860::8888", true), ("2001:db8::1", false),
      ("::ffff:0:7f00:1", false), ("::ffff:0:808:808", true), ("64:ff9b:1::a00:1", false),
      ("64:ff9b:1::808:808", true), ("2001:0:4136:e378:8000:63bf:80ff:fffe", false),
      ("2001:0:808:808:8000:63bf:f7f7:f7f7", true), ("2001:0:a00:1:8000:63bf:f7f7:f7f7", false),
      ("2600::200:5efe:a00:1", false), ("2600::200:5efe:808:808", true), ("3fff::1", false),
      ("2001:2::1", false), ("192.88.99.1", false), ("198.18.0.1", false),
    ])
  func classification(text: String, isPublic: Bool) {
    #expect(IPAddress(text)?.isPublic == isPublic)
  }

  @Test("allowed_networks lets named ranges through and nothing else")
  func allowedNetworks() throws {
    let policy = SourcePolicy(allowedNetworks: [IPNetwork("10.20.0.0/16")!, IPNetwork("::1/128")!])
    #expect(policy.allows(IPAddress("10.20.3.4")!))
    #expect(policy.allows(IPAddress("::ffff:10.20.3.4")!))
    #expect(policy.allows(IPAddress("::1")!))
    #expect(!policy.allows(IPAddress("10.21.0.1")!))
    #expect(!policy.allows(IPAddress("127.0.0.1")!))
    #expect(!policy.allows(IPAddress("169.254.169.254")!))
    #expect(policy.allows(IPAddress("8.8.8.8")!))
    #expect(IPNetwork("10.20.99.1/16") == IPNetwork("10.20.0.0/16"))
    for bad in ["10.0.0.0/33", "::/129", "x/8", "10.0.0.0/-1", "10.0.0.0/8/1", ""] {
      #expect(IPNetwork(bad) == nil, "\(bad) parsed")
    }
  }

  @Test("file:// is confined to its roots")
  func fileRoots() async throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent(
      "thumbd-root-\(UUID().uuidString)")
    let inside = root.appendingPathComponent("in")
    try FileManager.default.createDirectory(at: inside, withIntermediateDirectories: true)
    let outside = FileManager.default.temporaryDirectory.appendingPathComponent(
      "thumbd-outside-\(UUID().uuidString).jpg")
    try Data(Self.photo).write(to: outside)
    try Data(Self.photo).write(to: inside.appendingPathComponent("ok.jpg"))
    try FileManager.default.createSymbolicLink(
      atPath: inside.appendingPathComponent("escape.jpg").path, withDestinationPath: outside.path)
    defer {
      try? FileManager.default.removeItem(at: root)
      try? FileManager.default.removeItem(at: outside)
    }
    let policy = SourcePolicy(allowedSchemes: ["file"], fileRoots: [root.path])
    #expect(try await fetch("file://\(inside.path)/ok.jpg", policy).get() == Self.photo)
    for path in [
      "\(inside.path)/escape.jpg", "\(inside.path)/../../\(outside.lastPathComponent)",
      "\(inside.path)/%2e%2e/%2e%2e/\(outside.lastPathComponent)",
      // A combining mark after the '/' that ends a `..`.
      "\(root.path)/../%CD%95\(outside.lastPathComponent)",
      outside.path, inside.path, "/etc/passwd",
    ] {
      let result = await fetch("file://\(path)", policy)
      guard case .failure(.notAllowed) = result else {
        Issue.record("\(path) was not refused: \(result)")
        continue
      }
    }
    await #expect(throws: FetchError.self) {
      try await fetch("file://\(inside.path)/ok.jpg", SourcePolicy()).get()  // scheme not allowed
    }
  }
}

extension TransportEnd {
  /// The message of a failure, "" otherwise.
  var message: String {
    if case .failed(_, let message) = self { return message }
    return ""
  }
}

/// A resolver answering from a closure (given the number of earlier lookups), recording each
/// lookup.
final class RecordingResolver: NameResolving {
  private let answer: @Sendable (Int) -> [IPAddress]
  private let log = Mutex<[String]>([])

  init(_ answer: @escaping @Sendable (Int) -> [IPAddress]) { self.answer = answer }

  var lookups: [String] { log.withLock { $0 } }

  func addresses(of host: String, timeout: Double) async throws -> [IPAddress] {
    let count = log.withLock { log -> Int in
      defer { log.append(host) }
      return log.count
    }
    return answer(count)
  }
}
