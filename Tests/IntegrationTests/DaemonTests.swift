import Foundation
import Testing

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The real `thumbd serve` binary on a temporary socket, with a real origin on loopback.
@Suite("Daemon", .serialized, .onLane(.clients))
struct DaemonTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  /// Starts the daemon and waits until /healthz answers.
  private func startDaemon(_ extra: [String] = []) async throws -> (pid: pid_t, socket: String) {
    let daemon = try await TestDaemon.start(extra)
    return (daemon.pid, daemon.socket)
  }

  private func stop(_ pid: pid_t) {
    kill(pid, SIGTERM)
    ChildProcess.wait(pid)
  }

  @Test("200 concurrent identical requests reach the origin once and all get the image")
  func coalescesAcrossClients() async throws {
    let origin = try LoopbackOrigin { path in
      path == "/photo.jpg" ? .init(body: Self.photo) : .init(status: 404)
    }.start()
    defer { origin.stop() }
    let (pid, socket) = try await startDaemon(["--allow-private"])
    defer { stop(pid) }
    let url = origin.url("/photo.jpg").addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    let target = "/v1/thumbnail?url=\(url)&w=96&h=96"
    let statuses = await withTaskGroup(of: Int.self) { group in
      for _ in 0..<200 {
        group.addTask {
          await withCheckedContinuation { continuation in
            Thread.detachNewThread {
              continuation.resume(returning: SocketClient.get(socket, target).status)
            }
          }
        }
      }
      return await group.reduce(into: [Int]()) { $0.append($1) }
    }
    #expect(statuses.count == 200 && statuses.allSatisfy { $0 == 200 })
    #expect(origin.requests == ["/photo.jpg"], "the origin's own log: one fetch")
  }

  @Test("the socket is 0660, private origins and paths outside the roots are refused with 403")
  func safety() async throws {
    let (pid, socket) = try await startDaemon(["--file-root", Corpus.root + "/photo"])
    defer { stop(pid) }
    var info = stat()
    #expect(stat(socket, &info) == 0 && info.st_mode & 0o777 == 0o660)
    let outside = "file%3A%2F%2F%2Fetc%2Fpasswd"
    #expect(SocketClient.get(socket, "/v1/thumbnail?url=\(outside)&w=10").status == 403)
    #expect(
      SocketClient.get(socket, "/v1/thumbnail?url=http%3A%2F%2F127.0.0.1%2Fx.jpg&w=10").status
        == 403)
    let inside = ("file://" + Corpus.path("photo/coil/normal.jpg"))
      .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    #expect(SocketClient.get(socket, "/v1/thumbnail?url=\(inside)&w=10").status == 200)
  }

  @Test(
    "malformed requests get 400 and the daemon stays healthy; pipelined requests answer in order")
  func malformedAndPipelined() async throws {
    let (pid, socket) = try await startDaemon()
    defer { stop(pid) }
    for text in MalformedRequests.all.prefix(30) {
      let response = SocketClient.exchange(socket, Array(text.utf8))
      #expect([400, 413].contains(SocketClient.status(of: response)), "\(text.debugDescription)")
    }
    let pipelined = SocketClient.exchange(
      socket,
      Array(
        ("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /nope HTTP/1.1\r\nHost: a\r\n\r\n"
          + "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").utf8))
    let statuses = SocketClient.responses(in: pipelined).map(\.head.status)
    #expect(statuses == [200, 404, 200])
    #expect(SocketClient.get(socket, "/healthz").status == 200)
  }

  @Test("a client that hangs up mid-request does not disturb another waiting for the same image")
  func disconnectLeavesOthers() async throws {
    let origin = try LoopbackOrigin { path in
      path == "/slow.jpg" ? .init(body: Self.photo, holdUntilReleased: true) : .init(status: 404)
    }.start()
    defer { origin.stop() }
    let (pid, socket) = try await startDaemon(["--allow-private"])
    defer { stop(pid) }
    let url = origin.url("/slow.jpg").addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    let request = Array(
      "GET /v1/thumbnail?url=\(url)&w=48&h=48 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".utf8
    )
    // The first client asks and hangs up while the origin holds the download.
    let leaver = SocketClient.connect(socket)
    _ = request.withUnsafeBytes { send(leaver, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    await eventually("download held at the origin") { origin.held == 1 }
    // The second client asks for the same thumbnail, then the first one leaves.
    let stayer = StartedThread { SocketClient.exchange(socket, request) }
    await eventually("second request joined") {
      TestDaemon.metric("thumbd_coalesced_joins_total", at: socket) == 1
    }
    close(leaver)
    // The daemon has seen the hang-up once it counts the abandoned request (499).
    await eventually("hang-up processed") {
      TestDaemon.metric("thumbd_requests_total{status=\"499\"}", at: socket) == 1
    }
    origin.release()
    let response = try await stayer.value
    #expect(SocketClient.status(of: response) == 200)
    #expect(origin.requests == ["/slow.jpg"])
  }
}
