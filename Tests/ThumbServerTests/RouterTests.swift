import ImagePipeline
import Testing
import ThumbServer

@testable import TestSupport

/// The daemon's endpoints, driven with parsed requests (no socket yet).
@Suite("Router")
struct RouterTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  private func router(_ bodies: [String: [UInt8]]) -> Router {
    let thumbnails = ThumbnailRoute(
      pipeline: ThumbnailPipeline(configuration: .init(dataLoader: CountingLoader(bodies))),
      maxAge: 3600)
    let statuses = StatusCounts()
    return Router(
      routes: [
        thumbnails.route, HealthRoute().route,
        MetricsRoute(thumbnails: thumbnails, statuses: statuses).route,
      ], statuses: statuses)
  }

  private func get(_ target: String, headers: String = "") throws -> HTTPRequest {
    var parser = HTTPRequestParser()
    return try parser.feed(Array("GET \(target) HTTP/1.1\r\nHost: t\r\n\(headers)\r\n".utf8))[0]
  }

  @Test("a thumbnail: 200 with type, length, strong ETag, cache headers; then 304 and memory")
  func thumbnail() async throws {
    let router = router(["https://img.example/a.jpg": Self.photo])
    let target = "/v1/thumbnail?url=https%3A%2F%2Fimg.example%2Fa.jpg&w=64&h=64"
    let (first, source) = await router.respond(to: try get(target))
    #expect(first.status == 200 && source == .miss)
    #expect(first.header("Content-Type") == "image/jpeg")
    #expect(first.header("Cache-Control") == "public, max-age=3600")
    #expect(first.header("X-Thumbd-Cache") == "miss")
    let etag = try #require(first.header("ETag"))
    // Strong: the quoted 16 lower-case hex digits of a 64-bit digest.
    #expect(etag.utf8.count == 18 && etag.hasPrefix("\"") && etag.hasSuffix("\""))
    #expect(etag.dropFirst().dropLast().allSatisfy { $0.isHexDigit && !$0.isUppercase })
    #expect(ImageFormat.sniff(first.body) == .jpeg)
    let text = String(decoding: first.serialized(keepAlive: true), as: UTF8.self)
    #expect(
      text.hasPrefix("HTTP/1.1 200 OK\r\n")
        && text.contains("Content-Length: \(first.body.count)\r\n"))
    let (again, _) = await router.respond(
      to: try get(target, headers: "If-None-Match: \(etag)\r\n"))
    #expect(again.status == 304 && again.body.isEmpty && again.header("X-Thumbd-Cache") == "memory")
    let (other, _) = await router.respond(
      to: try get(target, headers: "If-None-Match: \"nope\"\r\n"))
    #expect(other.status == 200)
  }

  @Test("the wire form: status line, Date, headers in order, decimal Content-Length")
  func wireForm() throws {
    for (status, reason) in [(200, "OK"), (418, "Status")] {
      for length in [0, 1, 9, 10, 99, 100, 2048, 2049, 65_536, 1_234_567] {
        let response = HTTPResponse(
          status: status, headers: [("A", "1"), ("B", "two")],
          body: [UInt8](repeating: 7, count: length))
        let bytes = response.serialized(keepAlive: length % 2 == 0)
        let head = String(decoding: bytes.prefix(bytes.count - length), as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        #expect(lines[0] == "HTTP/1.1 \(status) \(reason)")
        #expect(lines[1].hasPrefix("Date: ") && lines[1].hasSuffix(" GMT"))
        let close = length % 2 == 0 ? [] : ["Connection: close"]
        #expect(
          Array(lines[2...]) == ["A: 1", "B: two", "Content-Length: \(length)"] + close + ["", ""])
        #expect(bytes.suffix(length).allSatisfy { $0 == 7 })
        let headOnly = response.serialized(keepAlive: true, headOnly: true)
        #expect(
          String(decoding: headOnly, as: UTF8.self).hasSuffix("Content-Length: \(length)\r\n\r\n"))
      }
    }
  }

  @Test("a 304 carries no Content-Length: a 0 would contradict the 200's (RFC 9110, 8.6)")
  func notModifiedHasNoLength() {
    let response = HTTPResponse(status: 304, headers: [("ETag", "\"x\"")])
    for headOnly in [false, true] {
      let text = String(
        decoding: response.serialized(keepAlive: true, headOnly: headOnly), as: UTF8.self)
      #expect(text.hasPrefix("HTTP/1.1 304 Not Modified\r\n"))
      #expect(!text.lowercased().contains("content-length"), "\(text)")
      #expect(text.hasSuffix("ETag: \"x\"\r\n\r\n"))
    }
  }

  @Test(
    "errors map to statuses with a JSON body",
    arguments: [
      ("/v1/thumbnail?w=64", 400), ("/v1/thumbnail?url=x&w=abc", 400),
      ("/v1/thumbnail?url=x&w=0&h=0", 400), ("/v1/thumbnail?url=x&w=10&fit=squash", 400),
      ("/v1/thumbnail?url=x&w=10&quality=0", 400), ("/v1/thumbnail?url=missing&w=10", 404),
      ("/v1/thumbnail?url=garbage&w=10", 415), ("/nope", 404),
      ("/v1/thumbnail?url=x&w=10&priority=urgent", 400),
      // Found by fuzzing: a box this size times the scale trapped converting to Int.
      ("/v1/thumbnail?url=x&h=4777777777777777772&scale=2", 400),
      ("/v1/thumbnail?url=x&w=-9223372036854775807&scale=8", 400),
    ])
  func errors(target: String, status: Int) async throws {
    let router = router(["garbage": Array("not an image".utf8)])
    let (response, _) = await router.respond(to: try get(target))
    #expect(response.status == status)
    #expect(response.header("Content-Type") == "application/json")
    let body = String(decoding: response.body, as: UTF8.self)
    #expect(body.hasPrefix("{\"error\":\"") && body.contains("\"message\":"))
  }

  @Test("health and metrics")
  func healthAndMetrics() async throws {
    let router = router(["https://img.example/a.jpg": Self.photo])
    #expect(await router.respond(to: try get("/healthz")).0.status == 200)
    _ = await router.respond(
      to: try get("/v1/thumbnail?url=https%3A%2F%2Fimg.example%2Fa.jpg&w=32"))
    let (metrics, _) = await router.respond(to: try get("/metrics"))
    let text = String(decoding: metrics.body, as: UTF8.self)
    for name in [
      "thumbd_requests_total{status=\"200\"} 2", "thumbd_cache_hits_total{tier=\"memory\"}",
      "thumbd_origin_fetches_total 1",
      "thumbd_stage_seconds_bucket{stage=\"decode\",le=\"+Inf\"} 1",
      "thumbd_inflight{stage=\"fetch\"}", "thumbd_process_resident_memory_bytes",
      "thumbd_process_open_fds",
    ] {
      #expect(text.contains(name), "\(name)")
    }
    var parser = HTTPRequestParser()
    let post = try parser.feed(Array("POST /healthz HTTP/1.1\r\nHost: t\r\n\r\n".utf8))[0]
    #expect(await router.respond(to: post).0.status == 405)
  }
}
