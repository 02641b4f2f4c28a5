import Foundation
import ImagePipeline
import Testing
import ThumbSystem

@testable import Loopback
@testable import TestSupport

/// Animated output through the real daemon: `max_animation_frames`, WebP asked for or
/// negotiated, and the frame limit in the cache key.
@Suite("Animation through the daemon", .serialized, .onLane(.clients))
struct AnimationDaemonTests {
  /// A daemon serving the corpus's 47-frame GIF from a file root.
  static func start(_ extra: [String]) async throws -> (TestDaemon, String) {
    let directory = TestDaemon.makeDirectory()
    let gif = directory + "/anim.gif"
    try Data(Corpus.bytes("gif-valid/danbooru/test-animated-3.35s.gif")).write(
      to: URL(fileURLWithPath: gif))
    let daemon = try await TestDaemon.start(
      ["--file-root", directory, "--allow-scheme", "file"] + extra, driver: .inProcess,
      directory: directory)
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

  @Test("GIF when asked for by name (query, path, extension), never by negotiation")
  func gifByName() async throws {
    let (daemon, target) = try await Self.start(["--max-animation-frames", "20"])
    defer { daemon.stop() }
    let asked = SocketClient.request(daemon.socket, "GET", target + "&format=gif")
    #expect(SocketClient.status(of: asked) == 200)
    #expect(SocketClient.header("content-type", in: asked) == "image/gif")
    let read = try #require(PillowImage.read(SocketClient.body(of: asked)))
    #expect(read.durations.count == 20 && read.loop == 0 && read.width == 100)
    // The path form's `@gif` and `f:gif` name the same picture.
    let url = target.split(separator: "=", maxSplits: 1)[1].split(separator: "&")[0]
    for path in [
      "/unsafe/rs:fit:100:100/plain/\(url)@gif", "/unsafe/f:gif/rs:fit:100:100/plain/\(url)",
    ] {
      let answer = SocketClient.request(daemon.socket, "GET", path)
      #expect(SocketClient.status(of: answer) == 200, "\(path)")
      #expect(SocketClient.body(of: answer) == SocketClient.body(of: asked), "\(path)")
    }
    // A client that accepts only GIF is answered as auto always is: never GIF.
    let negotiated = SocketClient.request(
      daemon.socket, "GET", target + "&format=auto", headers: ["Accept: image/gif"])
    #expect(SocketClient.header("content-type", in: negotiated) != "image/gif")
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
