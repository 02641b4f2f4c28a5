import Testing
import ThumbServer

@testable import TestSupport

/// The daemon's HTTP/1.1 request parser: strict, incremental, pipelining-safe.
@Suite("HTTP request parser")
struct HTTPParserTests {
  private func parse(_ text: String, limits: HTTPLimits = HTTPLimits()) throws -> [HTTPRequest] {
    var parser = HTTPRequestParser(limits: limits)
    return try parser.feed(Array(text.utf8))
  }

  @Test("a thumbnail request: path, decoded query, headers, keep-alive")
  func thumbnailRequest() throws {
    let requests = try parse(
      "GET /v1/thumbnail?url=https%3A%2F%2Fimg.example.com%2Fa%20b.jpg&w=128&h=96&fit=cover HTTP/1.1\r\n"
        + "Host: localhost\r\nIf-None-Match: \"abc\"\r\n\r\n")
    #expect(requests.count == 1)
    let request = requests[0]
    #expect(request.method == "GET" && request.path == "/v1/thumbnail")
    #expect(request.queryValue("url") == "https://img.example.com/a b.jpg")
    #expect(request.queryValue("w") == "128" && request.queryValue("fit") == "cover")
    #expect(request.header("if-none-match") == "\"abc\"")
    #expect(request.keepAlive)
  }

  @Test("field names are lowered, UTF-8 escapes decode, versions are matched exactly")
  func bytesLevelRules() throws {
    let request = try parse(
      "GET /caf%C3%A9?name=na%C3%AFve+x&plain=abc HTTP/1.0\r\nX-MiXeD-Name: Kept As Sent\r\n\r\n"
    )[0]
    #expect(request.header("x-mixed-name") == "Kept As Sent")
    #expect(request.path == "/caf\u{E9}" && request.queryValue("name") == "na\u{EF}ve x")
    #expect(request.queryValue("plain") == "abc")
    #expect(!request.keepAlive)  // HTTP/1.0 without keep-alive
    #expect(throws: HTTPParseError.unsupportedVersion) {
      _ = try parse("GET / HTTP/1.2\r\nHost: a\r\n\r\n")
    }
    #expect(throws: HTTPParseError.malformedRequestLine) {
      _ = try parse("GET / HTTQ/1.1\r\nHost: a\r\n\r\n")
    }
    // An escape that decodes to a lone continuation byte is not UTF-8.
    #expect(throws: HTTPParseError.malformedTarget) {
      _ = try parse("GET /?url=%80 HTTP/1.1\r\nHost: a\r\n\r\n")
    }
  }

  @Test("pipelined requests come out in order, whole or split at any byte")
  func pipelining() throws {
    let text =
      "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
      + "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
      + "GET /metrics HTTP/1.0\r\n\r\n"
    let whole = try parse(text)
    #expect(whole.map(\.path) == ["/healthz", "/x", "/metrics"])
    #expect(whole[1].body == Array("hello".utf8))
    #expect(!whole[2].keepAlive)
    var parser = HTTPRequestParser()
    var split: [HTTPRequest] = []
    for byte in text.utf8 { split += try parser.feed([byte]) }
    #expect(split == whole)
    #expect(parser.bufferedBytes == 0)
  }

  @Test("a header is found by its name in any ASCII case, and only by its name")
  func headerLookup() throws {
    let request = try parse("GET / HTTP/1.1\r\nHost: a\r\nX-Thumbd-Client: list-1\r\n\r\n")[0]
    for name in ["x-thumbd-client", "X-Thumbd-Client", "X-THUMBD-CLIENT"] {
      #expect(request.header(name) == "list-1")
    }
    #expect(request.header("x-thumbd-clien") == nil && request.header("X-Thumbd-Client2") == nil)
    #expect(request.header("x-thumbd-cl\u{130}ent") == nil)
  }

  @Test("the blank line ending a head is found at every offset, and the bytes after it kept")
  func headEndAtEveryOffset() throws {
    for padding in 0..<12 {
      let value = String(repeating: "v", count: padding)
      let text = "GET /a HTTP/1.1\r\nHost: h\r\nX: \(value)\r\n\r\nGET /b HTTP/1.1\r\nHo"
      var parser = HTTPRequestParser()
      let requests = try parser.feed(Array(text.utf8))
      #expect(requests.map(\.path) == ["/a"] && requests[0].header("x") == value)
      #expect(parser.bufferedBytes == "GET /b HTTP/1.1\r\nHo".utf8.count)
      #expect(try parser.feed(Array("st: h\r\n\r\n".utf8)).map(\.path) == ["/b"])
      #expect(parser.bufferedBytes == 0)
    }
  }

  @Test("bytes after an upgrade request, read with it, are handed over whole")
  func upgradeRemainder() throws {
    var parser = HTTPRequestParser()
    let requests = try parser.feed(
      Array(
        ("GET /v1/session HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: thumbd-session\r\n\r\n"
          + "{\"op\":1}\nGET / HTTP/1.1\r\n\r\n").utf8))
    #expect(requests.count == 1 && parser.awaitingUpgradeDecision)
    #expect(parser.takeRemainder() == Array("{\"op\":1}\nGET / HTTP/1.1\r\n\r\n".utf8))
    #expect(parser.bufferedBytes == 0)
  }

  @Test("Connection: close and upgrade tokens are read")
  func connectionTokens() throws {
    let request = try parse(
      "GET /v1/session HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, close\r\nUpgrade: thumbd-session\r\n\r\n"
    )[0]
    #expect(!request.keepAlive)
    #expect(request.connectionTokens == ["upgrade", "close"])
  }

  @Test("malformed requests are refused", arguments: MalformedRequests.all)
  func refusesMalformed(text: String) {
    #expect(throws: HTTPParseError.self) { _ = try parse(text) }
  }

  @Test("limits: request line, head size, header count, body")
  func limits() {
    let limits = HTTPLimits(maxRequestLine: 64, maxHeadBytes: 256, maxHeaders: 4, maxBodyBytes: 8)
    #expect(throws: HTTPParseError.requestLineTooLong) {
      _ = try parse("GET /" + String(repeating: "a", count: 100), limits: limits)
    }
    #expect(throws: HTTPParseError.headersTooLarge) {
      _ = try parse(
        "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 400), limits: limits)
    }
    #expect(throws: HTTPParseError.tooManyHeaders) {
      _ = try parse(
        "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", limits: limits)
    }
    #expect(throws: HTTPParseError.bodyTooLarge) {
      _ = try parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\n", limits: limits)
    }
  }
}
