import Foundation
import LoadHarness
import Testing
import ThumbClient

@testable import Loopback

#if canImport(Glibc)
  import Glibc
#endif

/// The one loopback origin and the one blocking client, as the tests and thumbload share them:
/// thumbload's synthetic origin is a handler on `LoopbackOrigin`, and its misbehaviours reach a
/// client as the wire shows them.
@Suite struct LoopbackTests {
  /// One GET through `HTTPRoundTrip` on a new TCP connection to `port`.
  private func get(_ port: UInt16, _ path: String, headers: [(String, String)] = [])
    -> HTTPRoundTrip.Outcome
  {
    let fd = SocketClient.connectTCP(port: port)
    guard fd >= 0 else { return .failed }
    defer { close(fd) }
    return HTTPRoundTrip.get(fd: fd, target: path, headers: headers)
  }

  @Test func syntheticItemsCarryValidatorsAndRevalidate() throws {
    var behaviour = OriginBehaviour()
    behaviour.latencyMs = 0
    behaviour.jitterMs = 0
    behaviour.maxAge = 60
    let origin = try SyntheticOrigin(behaviour: behaviour)
    defer { origin.stop() }
    guard case .reply(let first) = get(origin.port, "/item/7.jpg") else {
      Issue.record("no reply")
      return
    }
    #expect(first.status == 200 && first.body.starts(with: [0xFF, 0xD8]))
    #expect(first.headers["content-type"] == "image/jpeg")
    #expect(first.headers["cache-control"] == "max-age=60")
    let etag = try #require(first.headers["etag"])
    guard
      case .reply(let again) = get(origin.port, "/item/7.jpg", headers: [("If-None-Match", etag)])
    else {
      Issue.record("no reply to the revalidation")
      return
    }
    #expect(again.status == 304 && again.body.isEmpty)
    #expect(origin.revalidations == (asked: 1, notModified: 1))
    guard case .reply(let missing) = get(origin.port, "/nothing") else {
      Issue.record("no reply for a path that is not an item")
      return
    }
    #expect(missing.status == 404)
    #expect(origin.requests?["/item/7.jpg"] == 2 && origin.requests?["/nothing"] == 1)
    #expect(origin.bytesSent?["/item/7.jpg"] == first.body.count)
    #expect(origin.transfers?["/item/7.jpg"]?.count == 1)
  }

  @Test func syntheticFailuresAreWhatTheWireShows() throws {
    var behaviour = OriginBehaviour()
    behaviour.latencyMs = 0
    behaviour.jitterMs = 0
    behaviour.errorRate = 1
    let origin = try SyntheticOrigin(behaviour: behaviour, seed: 3)
    defer { origin.stop() }
    var overloaded = 0
    var broken = 0
    for item in 0..<60 {
      switch get(origin.port, "/item/\(item).jpg") {
      case .reply(let reply):
        // Every request fails: a whole reply can only be the 503.
        #expect(reply.status == 503)
        overloaded += 1
      case .closedBeforeReply, .failed:
        // A reset, or a body cut short of its declared length.
        broken += 1
      }
    }
    #expect(overloaded > 5 && broken > 10)
    // Cut bodies went out in part: half of an image, never all of it.
    let sent = origin.bytesSent ?? [:]
    #expect(sent.values.contains { $0 > 0 })
  }

  @Test func conflictingLengthsFailTheExchange() throws {
    // Two `Content-Length` fields that disagree: a smuggling hazard the client must not
    // settle by picking one.
    let origin = try LoopbackOrigin { _ in
      LoopbackOrigin.Response(
        rawHeaderLines: ["Content-Length: 3"], body: Array("hello".utf8))
    }.start()
    defer { origin.stop() }
    guard case .failed = get(origin.port, "/twice") else {
      Issue.record("a head with two lengths was read as a reply")
      return
    }
    #expect(origin.requests == ["/twice"])
  }

  @Test func originThatKeepsNoOrderStillCounts() throws {
    let origin = try LoopbackOrigin(port: 0, keepsOrder: false) { _ in
      LoopbackOrigin.Response(body: [1, 2, 3])
    }.start()
    defer { origin.stop() }
    for _ in 0..<3 { _ = get(origin.port, "/a") }
    #expect(origin.requests.isEmpty && origin.requestCounts == ["/a": 3])
  }
}
