import Foundation
import ImagePipeline
import Testing

@testable import Loopback
@testable import TestSupport
@testable import ThumbServer

#if canImport(Glibc)
  import Glibc
#endif

/// The HTTP handler's use of the poll's instant: the first request a read completes is
/// answered with a check of its file made after the poll, shared with the other requests of
/// the pass; a request behind it in the same read may have come after a change, so it gets
/// a check of its own. Driven by hand on a loop that is not running (its state is then
/// the test's thread's), over a real socket pair, a real file and a real pipeline.
@Suite("Arrival bound")
struct ArrivalBoundTests {
  /// Every whole response the handler has written so far, by its status line and
  /// `X-Thumbd-Cache`.
  private static func responses(on fd: Int32) -> [String] {
    SocketClient.responses(in: SocketBytes.unread(on: fd)).map { response in
      "\(response.head.status) " + (response.head.value("x-thumbd-cache") ?? "-")
    }
  }

  @Test("only the first request of a read shares the pass's check; one behind it sees a change")
  func firstRequestOnly() async throws {
    let root = TestDaemon.makeDirectory()
    let real = URL(fileURLWithPath: root).resolvingSymlinksInPath().path
    let photo = real + "/photo.jpg"
    try Data(try Corpus.bytes("photo/coil/normal.jpg")).write(to: URL(fileURLWithPath: photo))
    let loader = SourceLoader(policy: SourcePolicy(allowedSchemes: ["file"], fileRoots: [real]))
    let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: loader))
    let router = Router(routes: [ThumbnailRoute(pipeline: pipeline).route])
    let url = ("file://" + photo).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    let request = Array("GET /v1/thumbnail?url=\(url)&w=64&h=64 HTTP/1.1\r\nHost: t\r\n\r\n".utf8)
    var warm = HTTPRequestParser()
    #expect(await router.respond(to: try warm.feed(request)[0]).0.status == 200)

    let loop = try EventLoop(limits: ServerLimits(), logger: nil) { _, _ in fatalError("no accepts")
    }
    var fds: [Int32] = [0, 0]
    #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
    defer { close(fds[1]) }
    let handler = HTTPConnectionHandler(
      router: router, upgraders: [], logger: nil, loop: loop, hits: HitPath(router: router),
      limits: HTTPLimits(),
      outputLimit: 1 << 20)
    let connection = LoopConnection(
      id: ConnectionID(value: 1), fd: fds[0], loop: loop, handler: handler, now: 0)
    defer { loop.closeConnection(connection) }

    // The poll: a request it saw is answered at once, its file checked after the poll.
    let polled = ContinuousClock.now
    connection.arrivalBound = polled
    _ = handler.received(request[...], on: connection)
    #expect(Self.responses(on: fds[1]) == ["200 memory"])

    // The file changes after that check. A request that was in the socket at the poll may
    // still be answered with the check (its client sent it before the change); the one read
    // behind it in the same read may have been sent after the change, and must not be.
    try Data(try Corpus.bytes("photo/coil/large.jpg")).write(to: URL(fileURLWithPath: photo))
    connection.arrivalBound = polled
    _ = handler.received((request + request)[...], on: connection)
    // The second was checked afresh, found the change and went to be made anew.
    #expect(Self.responses(on: fds[1]) == ["200 memory"], "the second request shared the check")
    #expect(pipeline.metrics.snapshot().sourceChanges == 1)
  }
}
