import Testing
import ThumbServer

@testable import TestSupport

/// What reaches the logs of a source URL.
@Suite("Logging")
struct LoggingTests {
  @Test("a source is scheme, host and port plus a hash; never credentials, path or query")
  func redaction() {
    let secret = "https://user:pw@Img.Example.com:8443/a/b.jpg?token=abc#frag"
    let shown = LogRedaction.source(secret)
    #expect(shown.hasPrefix("https://img.example.com:8443#"))
    for leak in ["user", "pw", "/a/b", "token", "abc", "frag"] { #expect(!shown.contains(leak)) }
    #expect(LogRedaction.source(secret) == shown, "stable")
    #expect(LogRedaction.source(secret + "x") != shown, "tells sources apart")
    #expect(LogRedaction.source("file:///srv/p.jpg").hasPrefix("file://#"))
    #expect(LogRedaction.source("no scheme here").hasPrefix("invalid#"))
  }

  @Test("durations print as milliseconds with three decimals")
  func milliseconds() {
    #expect(Logger.milliseconds(.microseconds(1_234_567)) == "1234.567")
    #expect(Logger.milliseconds(.microseconds(5)) == "0.005")
    #expect(Logger.milliseconds(.zero) == "0.000")
  }
}
