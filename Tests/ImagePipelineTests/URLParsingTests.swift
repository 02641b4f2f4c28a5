import Testing
import ThumbSystem
import ThumbWire

@testable import ImagePipeline
@testable import TestSupport

/// The pure parsers of the fetcher: source URLs, redirect targets, response heads, HTTP dates.
@Suite("URL and response parsing")
struct URLParsingTests {
  @Test(
    "valid URLs parse to their normal form",
    arguments: [
      ("https://Example.COM/a/b.jpg?x=1#frag", "https://example.com/a/b.jpg?x=1"),
      ("http://example.com:80/", "http://example.com/"),
      ("http://example.com:8080", "http://example.com:8080/"),
      ("http://[::1]:9000/x", "http://[::1]:9000/x"),
      ("http://[2001:DB8::1]/x", "http://[2001:db8::1]/x"),
      ("http://example.com./a", "http://example.com/a"),
      ("http://example.com/a b/ü.jpg", "http://example.com/a%20b/%C3%BC.jpg"),
      ("http://example.com/a/./b/../c", "http://example.com/a/c"),
      ("http://example.com/%2e%2e/x", "http://example.com/%2e%2e/x"),
      ("http://192.168.0.1/", "http://192.168.0.1/"),
      ("HTTP://img_1.example.com/", "http://img_1.example.com/"),
      // Dot segments at the ends, names that only start with dots, empty segments, a query
      // left alone, and escapes beside removed segments.
      ("http://e.com/a/.", "http://e.com/a/"),
      ("http://e.com/a/..", "http://e.com/"),
      ("http://e.com/..", "http://e.com/"),
      ("http://e.com/.a/..b/...", "http://e.com/.a/..b/..."),
      ("http://e.com//a//b", "http://e.com//a//b"),
      ("http://e.com/a?x=/../y", "http://e.com/a?x=/../y"),
      ("http://e.com/a b/../c d?q r", "http://e.com/c%20d?q%20r"),
      ("http://e.com?q", "http://e.com/?q"),
    ])
  func valid(text: String, normal: String) throws {
    #expect(try SourceURL(text).description == normal)
  }

  @Test(
    "malformed and dangerous URLs are refused",
    arguments: [
      "", "example.com/x", "http:/x", "http://", "http://user@example.com/",
      "http://user:pass@example.com/", "http://example.com:0/", "http://example.com:65536/",
      "http://example.com:8a/", "http://ex ample.com/", "http://exa%6dple.com/",
      "http://exämple.com/", "http://[::1%25eth0]/", "http://[::1/", "http://[::1]x/",
      "http://0x7f.1/", "http://2130706433/", "http://127.1/", "http://017700000001/",
      "http://a..b/", "http://example.com/\u{0}", "http://example.com/a\nb", "1http://x/",
      "http://-/../", "http://" + String(repeating: "a", count: 64) + ".com/",
    ])
  func invalid(text: String) {
    #expect(throws: FetchError.self) { try SourceURL(text) }
  }

  @Test(
    "redirect targets resolve against the URL they came from (RFC 3986, 5.4)",
    arguments: [
      ("http://a/b/c/d;p?q", "g", "http://a/b/c/g"),
      ("http://a/b/c/d;p?q", "./g", "http://a/b/c/g"),
      ("http://a/b/c/d;p?q", "g/", "http://a/b/c/g/"),
      ("http://a/b/c/d;p?q", "/g", "http://a/g"),
      ("http://a/b/c/d;p?q", "//g", "http://g/"),
      ("http://a/b/c/d;p?q", "?y", "http://a/b/c/d;p?y"),
      ("http://a/b/c/d;p?q", "g?y", "http://a/b/c/g?y"),
      ("http://a/b/c/d;p?q", "#s", "http://a/b/c/d;p?q"),
      ("http://a/b/c/d;p?q", "..", "http://a/b/"),
      ("http://a/b/c/d;p?q", "../g", "http://a/b/g"),
      ("http://a/b/c/d;p?q", "../../../g", "http://a/g"),
      ("http://a/b/c/d;p?q", "https://other.example:8443/x", "https://other.example:8443/x"),
    ])
  func resolution(base: String, reference: String, expected: String) throws {
    #expect(try SourceURL(base).resolving(reference).description == expected)
  }

  @Test("a redirect cannot smuggle user info or a bad host")
  func redirectRules() throws {
    let base = try SourceURL("http://a.example/x")
    for reference in ["http://u:p@evil/", "//u@evil/", "http://0x7f.1/", "http://a\u{7f}b/"] {
      #expect(throws: FetchError.self) { try base.resolving(reference) }
    }
  }

  @Test("file URLs take no host, and decode their path")
  func fileURLs() throws {
    #expect(try SourceURL("file:///photos/caf%C3%A9.jpg").filePath == "/photos/café.jpg")
    #expect(try SourceURL("file://localhost/p.jpg").filePath == "/p.jpg")
    #expect(try SourceURL("file:///a%00b").filePath == nil)
    #expect(throws: FetchError.self) { try SourceURL("file://server/share/p.jpg") }
    // Issue 52: a Latin-1 name is a file too (it was refused as "not valid UTF-8"), and it is
    // not the UTF-8 name that looks the same.
    let latin1 = try #require(try SourceURL("file:///photos/caf%E9.jpg").filePath)
    #expect(PathBytes.bytes(latin1) == Array("/photos/caf".utf8) + [0xE9] + Array(".jpg".utf8))
    #expect(latin1 != "/photos/café.jpg")
  }

  /// The URI thumbd writes for a path (`PercentEncoding.fileURI`, GLib's spelling) is read back
  /// as the same bytes, whatever they are: the desktop's, HTTP's and sessions' file URLs agree.
  @Test("a file URI of any path's bytes reads back as those bytes")
  func fileURIRoundTrip() throws {
    var random = SeededRandom(seed: 52)
    for _ in 0..<2_000 {
      let length = Int(random.next() % 12) + 1
      var name: [UInt8] = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next() % 255 + 1)
      }
      name.removeAll { $0 == UInt8(ascii: "/") }
      // `.` and `..` are dot segments in a URL, not names.
      if name.isEmpty || name == [0x2E] || name == [0x2E, 0x2E] { continue }
      let path = [UInt8(ascii: "/")] + name
      let uri = PercentEncoding.fileURI(path: PathBytes.string(path))
      let back = try #require(try SourceURL(uri).filePath, "\(uri)")
      #expect(PathBytes.bytes(back) == path, "\(uri)")
    }
  }

  @Test("response heads: status, fields, lengths")
  func heads() throws {
    let head = try ResponseHead(
      parsing: Array(
        "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 12\r\nX-A:  b \r\n\r\n".utf8)
    )
    #expect(head.status == 200)
    #expect(head.value("content-type") == "image/png")
    #expect(head.value("x-a") == "b")
    #expect(try head.declaredLength() == 12)
    let h2 = try ResponseHead(parsing: Array("HTTP/2 404 \r\nlocation: /x\r\n\r\n".utf8))
    #expect(h2.status == 404)
    let agreeing = try ResponseHead(
      parsing: Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5, 5\r\n\r\n".utf8))
    #expect(try agreeing.declaredLength() == 5)
  }

  @Test(
    "malformed response heads are refused",
    arguments: [
      "", "HTTP/1.1\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 999 X\r\n\r\n",
      "HTTX/1.1 200 OK\r\n\r\n", "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nContent-Length: 12\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 10, 11\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX: a\u{1}b\r\n\r\n",
    ])
  func badHeads(text: String) {
    #expect(throws: ResponseHead.ParseError.self) { try ResponseHead(parsing: Array(text.utf8)) }
  }

  @Test("Retry-After: seconds and HTTP dates")
  func retryAfter() throws {
    let now = 784_111_777.0  // Sun, 06 Nov 1994 08:49:37 GMT
    func head(_ value: String) throws -> ResponseHead {
      try ResponseHead(parsing: Array("HTTP/1.1 503 X\r\nRetry-After: \(value)\r\n\r\n".utf8))
    }
    #expect(try head("120").retryAfter(now: now) == 120)
    #expect(try head("Sun, 06 Nov 1994 08:49:47 GMT").retryAfter(now: now) == 10)
    #expect(try head("Sunday, 06-Nov-94 08:50:37 GMT").retryAfter(now: now) == 60)
    #expect(try head("Sun Nov  6 08:49:37 1994").retryAfter(now: now) == 0)
    #expect(try head("soon").retryAfter(now: now) == nil)
    #expect(HTTPDate.format(now) == "Sun, 06 Nov 1994 08:49:37 GMT")
    #expect(HTTPDate.parse(HTTPDate.format(1_798_761_600)) == 1_798_761_600)
  }

  /// Found by fuzzing: a lenient reader took "0026" for the year 26, and a long digit run for
  /// a year would overflow the day count.
  @Test(
    "dates not in one of the three exact forms are refused",
    arguments: [
      "$d, 2\u{0e}1 Oct 2026 0026 07:28:0000 GMT 6 07:28:00",
      "Tue, 06 Oct 26 07:28:00 GMT", "Tue, 6 Oct 2026 07:28:00 GMT", "Tue, 06 Oct 2026 7:28:00 GMT",
      "Tue, 06 Oct 2026 07:28:00 UTC", "Tue 06 Oct 2026 07:28:00 GMT",
      "Tue, 06 Oct 99999999999999999999 07:28:00 GMT", "Tue, 32 Oct 2026 07:28:00 GMT",
      "Tuesday, 06-Oct-2026 07:28:00 GMT", "Tue Oct  6 07:28:00 26", "",
    ])
  func strictDates(text: String) {
    #expect(HTTPDate.parse(text) == nil)
  }

  @Test("a date of any four-digit year formats back to itself")
  func fourDigitYears() throws {
    let early = try #require(HTTPDate.parse("Tue, 06 Oct 0026 07:28:00 GMT"))
    #expect(HTTPDate.format(early) == "Tue, 06 Oct 0026 07:28:00 GMT")
    #expect(HTTPDate.parse(HTTPDate.format(early)) == early)
  }
}
