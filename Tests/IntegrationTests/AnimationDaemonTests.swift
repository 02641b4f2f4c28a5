import Foundation
import ImagePipeline
import Testing
import ThumbSystem

@testable import Loopback
@testable import TestSupport

/// Animated output through the real daemon: `max_animation_frames`, WebP asked for or
/// negotiated, and the frame limit in the cache key.
@Suite("Animation through the daemon", .serialized)
struct AnimationDaemonTests {
  /// A daemon serving the corpus's 47-frame GIF from a file root.
  static func start(_ extra: [String]) async throws -> (TestDaemon, String) {
    let directory = TestDaemon.makeDirectory()
    let gif = directory + "/anim.gif"
    try Data(Corpus.bytes("gif-valid/danbooru/test-animated-3.35s.gif")).write(
      to: URL(fileURLWithPath: gif))
    let daemon = try await TestDaemon.start(
      ["--file-root", directory, "--allow-scheme", "file"] + extra, directory: directory)
    return (daemon, "/v1/thumbnail?url=file://\(gif)&w=100&h=100")
  }

  @Test("with max_animation_frames, a GIF asked as WebP, or negotiated to it, stays animated")
  func animated() async throws {
    let (daemon, target) = try await Self.start(["--max-animation-frames", "20"])
    defer { daemon.stop() }
    let asked = SocketClient.request(daemon.socket, "GET", target + "&format=webp")
    #expect(SocketClient.status(of: asked) == 200)
    #expect(SocketClient.header("content-type", in: asked) == "image/webp")
    let frames = try #require(WebPAnimation.read(SocketClient.body(of: asked)))
    #expect(frames.durations.count == 20 && frames.loop == 0)
    let negotiated = SocketClient.request(
      daemon.socket, "GET", target + "&format=auto", headers: ["Accept: image/webp,*/*"])
    #expect(WebPAnimation.read(SocketClient.body(of: negotiated))?.durations.count == 20)
    let jpeg = SocketClient.request(daemon.socket, "GET", target + "&format=jpeg")
    #expect(SocketClient.header("content-type", in: jpeg) == "image/jpeg")
  }

  @Test("by default the first frame alone, as before")
  func stillByDefault() async throws {
    let (daemon, target) = try await Self.start([])
    defer { daemon.stop() }
    let still = SocketClient.request(daemon.socket, "GET", target + "&format=webp")
    #expect(WebPAnimation.read(SocketClient.body(of: still))?.durations.count == 1)
  }

  @Test("past max_pixels, frames times pixels are a 422 before decoding")
  func overLimit() async throws {
    let (daemon, target) = try await Self.start([
      "--max-animation-frames", "40", "--max-pixels", "1000000",
    ])
    defer { daemon.stop() }
    // 47 frames of 241x178 hold about 2 MP.
    let refused = SocketClient.request(daemon.socket, "GET", target + "&format=webp")
    #expect(SocketClient.status(of: refused) == 422)
    #expect(String(decoding: SocketClient.body(of: refused), as: UTF8.self).contains("too_complex"))
  }
}
