import Foundation
import LoadHarness
import Testing
import ThumbClient

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The one loopback origin and the one blocking client, as the tests and thumbload share them:
/// thumbload's synthetic origin is a handler on `LoopbackOrigin`, and its misbehaviours reach a
/// client as the wire shows them.
@Suite(.onLane(.clients)) struct LoopbackTests {
  /// One GET through `HTTPRoundTrip` on a new TCP connection to `port`.
  private func get(_ port: UInt16, _ path: String, headers: [(String, String)] = [])
    -> HTTPRoundTrip.Outcome
  {
    let fd = SocketClient.connectTCP(port: port)
    guard fd >= 0 else { return .failed }
    defer { close(fd) }
    return HTTPRoundTrip.get(fd: fd, target: path, headers: headers)
  }

  @Test("stopping an origin again leaves alone the socket that took its listener's number")
  func stopTwice() async throws {
    // The number is free once the accept loop closed it; a socket of ours takes it, unless
    // another test's descriptor did first (then the round is tried again).
    for _ in 0..<50 {
      let origin = try LoopbackOrigin { _ in .init(status: 404) }.start()
      origin.stop()
      let ended = origin.acceptEnded
      _ = try await offPool { ended.wait() }
      var pair: [Int32] = [0, 0]
      #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
      // The lowest free numbers go first: one end of the pair usually has it already.
      if pair[1] == origin.listener { pair.swapAt(0, 1) }
      if pair[0] != origin.listener {
        let moved = fcntl(pair[0], F_DUPFD_CLOEXEC, origin.listener)
        close(pair[0])
        pair[0] = moved
      }
      let (taken, other) = (pair[0], pair[1])
      defer {
        close(taken)
        close(other)
      }
      guard taken == origin.listener else { continue }
      origin.stop()
      var byte: UInt8 = 7
      #expect(send(other, &byte, 1, Int32(MSG_NOSIGNAL)) == 1, "our socket was shut down")
      byte = 0
      #expect(read(taken, &byte, 1) == 1 && byte == 7, "our socket was shut down")
      return
    }
    Issue.record("the listener's number was never free for this test to take")
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
    // The reply is read once its last byte is out; the origin counts it just after.
    #expect(origin.waitUntilIdle(), "a connection is still open")
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
    #expect(origin.waitUntilIdle(), "a connection is still open")
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
