import Foundation
import Testing

@testable import ImagePipeline

/// Real HTTP against a real origin on loopback, `file://` confinement, and address rules.
@Suite("Fetchers")
struct FetcherTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  static func origin() throws -> TestOrigin {
    try TestOrigin { path in
      switch path {
      case "/photo.jpg": return .init(body: photo)
      case "/missing": return .init(status: 404, body: Array("no".utf8))
      case "/huge": return .init(streamedLength: 1 << 30, pauseAfterBytes: 4 << 20)
      case "/huge-unsized":
        return .init(streamedLength: 1 << 30, omitLength: true, pauseAfterBytes: 4 << 20)
      case "/slow": return .init(holdUntilStopped: true)
      case "/to-private":
        return .init(status: 302, headers: ["Location": "http://10.255.0.1/x.jpg"])
      case "/to-photo": return .init(status: 302, headers: ["Location": "/photo.jpg"])
      case "/loop": return .init(status: 302, headers: ["Location": "/loop"])
      default: return .init(status: 500)
      }
    }.start()
  }

  /// Loopback is allowed by host for these tests; every other non-public address stays refused.
  static func loopbackPolicy(maxBytes: Int = 8 << 20, timeout: Double = 20) -> SourcePolicy {
    SourcePolicy(
      allowPrivateAddresses: true, maxSourceBytes: maxBytes, connectTimeout: timeout,
      totalTimeout: timeout * 2)
  }

  private func fetch(_ url: String, _ policy: SourcePolicy) async -> Result<[UInt8], FetchError> {
    do {
      return .success(try await SourceLoader(policy: policy).loadData(for: url))
    } catch let error as FetchError {
      return .failure(error)
    } catch {
      Issue.record("unexpected error \(error)")
      return .failure(.transport("\(error)"))
    }
  }

  @Test("a successful fetch returns the exact bytes")
  func success() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    #expect(try await fetch(origin.url("/photo.jpg"), Self.loopbackPolicy()).get() == Self.photo)
    #expect(try await fetch(origin.url("/to-photo"), Self.loopbackPolicy()).get() == Self.photo)
  }

  @Test("404 gives httpStatus(404)")
  func notFound() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    await #expect(throws: FetchError.httpStatus(404)) {
      try await fetch(origin.url("/missing"), Self.loopbackPolicy()).get()
    }
  }

  @Test("a body over the cap fails before it is all read", arguments: ["/huge", "/huge-unsized"])
  func bodyCap(path: String) async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    await #expect(throws: FetchError.tooLarge(limit: 1 << 20)) {
      try await fetch(origin.url(path), Self.loopbackPolicy(maxBytes: 1 << 20)).get()
    }
    #expect(origin.requests == [path])
    // The origin stops after 4 MiB of its 1 GiB until released, so the fetch can only have
    // failed on the cap while the body streamed: either the origin is still paused (it records
    // bytes only once it stops writing) or it was cut off before the pause.
    #expect((origin.bytesSent(for: path) ?? 0) <= 4 << 20)
    origin.release()
  }

  @Test("a slow origin times out on our own deadline")
  func slowOrigin() async throws {
    let origin = try Self.origin()
    defer { origin.stop() }
    let result = await fetch(origin.url("/slow"), Self.loopbackPolicy(timeout: 0.3))
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
    let policy = SourcePolicy(allowLoopback: true, maxSourceBytes: 8 << 20)
    #expect(try await fetch(origin.url("/photo.jpg"), policy).get() == Self.photo)
    let result = await fetch(origin.url("/to-private"), policy)
    guard case .failure(.notAllowed) = result else {
      Issue.record("redirect to 10.255.0.1 was not refused: \(result)")
      return
    }
    await #expect(throws: FetchError.tooManyRedirects(3)) {
      try await fetch(origin.url("/loop"), Self.loopbackPolicy()).get()
    }
  }

  @Test("private addresses are refused unless configured, by resolved address")
  func privateAddresses() async throws {
    let policy = SourcePolicy()
    for url in [
      "http://127.0.0.1/x.jpg", "http://localhost/x.jpg", "http://[::1]/x.jpg",
      "http://[::ffff:10.0.0.1]/x.jpg", "http://169.254.169.254/latest", "http://100.64.1.1/",
      "http://192.168.1.1/", "http://[fd00::1]/",
    ] {
      let result = await fetch(url, policy)
      guard case .failure(.notAllowed) = result else {
        Issue.record("\(url) was not refused: \(result)")
        continue
      }
    }
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
    ])
  func classification(text: String, isPublic: Bool) {
    #expect(IPAddress(text)?.isPublic == isPublic)
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
