import ImagePipeline
import Testing

@testable import ThumbServer

/// `Accept` parsing and the `auto` rules, without sockets.
@Suite("Format negotiation rules")
struct FormatNegotiationTests {
  @Test(
    "Accept headers name WebP and AVIF only explicitly and with a non-zero q",
    arguments: [
      (nil, false, false),
      ("*/*", false, false),
      ("image/*", false, false),
      ("image/webp", true, false),
      ("image/avif,image/webp,image/apng,*/*;q=0.8", true, true),
      ("text/html, IMAGE/WEBP ; q=0.5", true, false),
      ("image/webp;q=0", false, false),
      ("image/webp; q=0.000, image/avif;q=0.001", false, true),
      ("image/webpx, image/avi", false, false),
      ("image/avif;level=1;Q=1.0", false, true),
      (",,;, image/webp ,", true, false),
    ] as [(String?, Bool, Bool)])
  func parsesAccept(header: String?, webp: Bool, avif: Bool) {
    let accepted = AcceptedFormats(acceptHeader: header)
    #expect(accepted == AcceptedFormats(webp: webp, avif: avif), "\(header ?? "nil")")
  }

  @Test("several Accept lines are one list: a format named on the second counts")
  func severalAcceptFields() throws {
    var parser = HTTPRequestParser()
    let text =
      "GET /x HTTP/1.1\r\nHost: t\r\nAccept: text/html\r\nAccept: image/webp\r\n"
      + "accept: image/avif;q=0.5\r\n\r\n"
    let request = try #require(try parser.feed(Array(text.utf8)).first)
    #expect(AcceptedFormats(acceptOf: request) == AcceptedFormats(webp: true, avif: true))
  }

  @Test("auto resolves to AVIF only when enabled, then WebP, else stays auto; named formats stay")
  func resolves() {
    let both = AcceptedFormats(webp: true, avif: true)
    #expect(FormatNegotiation.resolve(.auto, accepted: both, avifEnabled: true) == .avif)
    #expect(FormatNegotiation.resolve(.auto, accepted: both, avifEnabled: false) == .webp)
    #expect(FormatNegotiation.resolve(.auto, accepted: .basic, avifEnabled: true) == .auto)
    #expect(FormatNegotiation.resolve(.png, accepted: both, avifEnabled: true) == .png)
  }
}
