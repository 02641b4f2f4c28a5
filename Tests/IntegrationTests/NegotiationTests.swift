import Foundation
import ImagePipeline
import Testing
import ThumbClient
import ThumbSystem

@testable import Loopback
@testable import TestSupport

/// `format=auto` negotiated from `Accept` against the real daemon: the chosen format in the
/// cache key, `Vary: Accept` on every negotiated answer (memory and disk hits too), named
/// formats unaffected, sessions stating their formats once.
@Suite("Format negotiation", .serialized, .onLane(.clients))
struct NegotiationTests {
  /// A daemon serving one photo from a file root, with a disk cache: in this process unless a
  /// test restarts it on the same cache (a process's exit lets go of the cache's lock).
  private static func start(
    _ extra: [String] = [], driver: DaemonDriver = .inProcess,
    directory: String = TestDaemon.makeDirectory()
  ) async throws -> (TestDaemon, String) {
    let photo = directory + "/photo.jpg"
    if !FileManager.default.fileExists(atPath: photo) {
      try Data(Corpus.bytes("photo/coil/normal.jpg")).write(to: URL(fileURLWithPath: photo))
    }
    let daemon = try await TestDaemon.start(
      ["--file-root", directory, "--allow-scheme", "file"] + extra, driver: driver,
      directory: directory)
    return (daemon, "/v1/thumbnail?url=file://\(photo)&w=64&h=64")
  }

  private static func get(_ daemon: TestDaemon, _ target: String, accept: String?) -> [UInt8] {
    SocketClient.request(
      daemon.socket, "GET", target, headers: accept.map { ["Accept: " + $0] } ?? [])
  }

  @Test("image/webp and */* give two entries in two formats, each with Vary: Accept")
  func webpAndWildcard() async throws {
    let (daemon, target) = try await Self.start()
    defer { daemon.stop() }
    let webp = Self.get(daemon, target, accept: "image/webp,*/*;q=0.8")
    let plain = Self.get(daemon, target, accept: "*/*")
    #expect(SocketClient.header("content-type", in: webp) == "image/webp")
    #expect(ImageFormat.sniff(SocketClient.body(of: webp)) == .webp)
    #expect(SocketClient.header("content-type", in: plain) == "image/jpeg")
    #expect(ImageFormat.sniff(SocketClient.body(of: plain)) == .jpeg)
    for response in [webp, plain] {
      #expect(SocketClient.header("vary", in: response) == "Accept")
    }
    #expect(daemon.metric("thumbd_memory_cache_entries") == 2)
    #expect(daemon.metric("thumbd_decodes_total") == 2)
    // Memory hits keep Vary, and a 304 too.
    let hit = Self.get(daemon, target, accept: "image/webp")
    #expect(SocketClient.header("x-thumbd-cache", in: hit) == "memory")
    #expect(SocketClient.header("vary", in: hit) == "Accept")
    #expect(SocketClient.body(of: hit) == SocketClient.body(of: webp))
    let etag = try #require(SocketClient.header("etag", in: hit))
    let notModified = SocketClient.request(
      daemon.socket, "GET", target, headers: ["Accept: image/webp", "If-None-Match: " + etag])
    #expect(SocketClient.status(of: notModified) == 304)
    #expect(SocketClient.header("vary", in: notModified) == "Accept")
  }

  @Test("disk hits after a restart carry Vary: Accept and the negotiated format")
  func diskHitsVary() async throws {
    let directory = TestDaemon.makeDirectory()
    let (first, target) = try await Self.start(driver: .process, directory: directory)
    let made = Self.get(first, target, accept: "image/webp")
    #expect(SocketClient.header("content-type", in: made) == "image/webp")
    await eventually("written to disk") { first.metric("thumbd_disk_cache_entries") ?? 0 >= 1 }
    first.stop()
    let (second, _) = try await Self.start(driver: .process, directory: directory)
    defer { second.stop() }
    let hit = Self.get(second, target, accept: "image/webp")
    #expect(SocketClient.header("x-thumbd-cache", in: hit) == "disk")
    #expect(SocketClient.header("vary", in: hit) == "Accept")
    #expect(SocketClient.header("content-type", in: hit) == "image/webp")
    #expect(SocketClient.body(of: hit) == SocketClient.body(of: made))
  }

  @Test("50 distinct Accept strings make at most four entries")
  func manyAcceptStrings() async throws {
    let (daemon, target) = try await Self.start(["--auto-avif"])
    defer { daemon.stop() }
    var generator = SeededRandom(seed: 1201)
    let pieces = [
      "text/html", "application/xhtml+xml", "image/webp", "image/avif", "image/apng",
      "image/svg+xml", "image/*", "*/*", "image/jxl", "image/png",
    ]
    var seen = Set<String>()
    var formats = Set<String>()
    while seen.count < 50 {
      let count = 1 + Int(generator.next() % 5)
      var parts: [String] = []
      for _ in 0..<count {
        let piece = pieces[Int(generator.next() % UInt64(pieces.count))]
        let q = generator.next() % 3 == 0 ? ";q=0.\(1 + generator.next() % 9)" : ""
        parts.append(piece + q)
      }
      let accept = parts.joined(separator: generator.next() % 2 == 0 ? "," : ", ")
      guard seen.insert(accept).inserted else { continue }
      let response = Self.get(daemon, target, accept: accept)
      #expect(SocketClient.status(of: response) == 200)
      #expect(SocketClient.header("vary", in: response) == "Accept")
      let type = SocketClient.header("content-type", in: response) ?? ""
      formats.insert(type)
      // The format follows the rules: AVIF if named, else WebP if named, else JPEG.
      let expected =
        accept.contains("image/avif")
        ? "image/avif" : accept.contains("image/webp") ? "image/webp" : "image/jpeg"
      #expect(type == expected, "\(accept)")
    }
    let entries = try #require(daemon.metric("thumbd_memory_cache_entries"))
    #expect(entries <= 4 && entries == Double(formats.count))
    #expect(daemon.metric("thumbd_decodes_total") == entries)
  }

  @Test("a named format is not negotiated: no Vary, whatever Accept says")
  func namedFormats() async throws {
    let (daemon, target) = try await Self.start()
    defer { daemon.stop() }
    for (format, type) in [("webp", "image/webp"), ("avif", "image/avif"), ("jpeg", "image/jpeg")] {
      let response = Self.get(daemon, target + "&format=" + format, accept: "image/png")
      #expect(SocketClient.status(of: response) == 200)
      #expect(SocketClient.header("content-type", in: response) == type)
      #expect(SocketClient.header("vary", in: response) == nil)
      let body = SocketClient.body(of: response)
      #expect(ImageFormat.sniff(body)?.mimeType == type)
    }
    // AVIF in auto only when the config enables it.
    let auto = Self.get(daemon, target, accept: "image/avif")
    #expect(SocketClient.header("content-type", in: auto) == "image/jpeg")
  }

  @Test("a session states its formats once, in the upgrade; auto loads follow them")
  func sessionAccept() async throws {
    let (daemon, target) = try await Self.start()
    defer { daemon.stop() }
    let url = String(target.split(separator: "=", maxSplits: 1)[1].prefix { $0 != "&" })
    let webpClient = try ThumbClient(endpoint: .unix(daemon.socket), accepting: [.webp])
    let plainClient = try ThumbClient(endpoint: .unix(daemon.socket))
    for client in [webpClient, plainClient] {
      try client.load(slot: 0, item: "photo", token: 1, url: url, width: 64, height: 64)
    }
    func first(_ client: ThumbClient) async -> ThumbClient.Image? {
      for await event in client.events { if case .image(let image) = event { return image } }
      return nil
    }
    let webp = await first(webpClient)
    let plain = await first(plainClient)
    #expect(webp?.format == "webp")
    #expect(webp.map { ImageFormat.sniff($0.data) } == .webp)
    #expect(plain?.format == "jpeg")
  }
}
