import Foundation
import ImagePipeline
import Testing

@testable import Loopback
@testable import TestSupport

/// Videos, PDFs and SVGs through the real daemon (issues 54 and 53): its worker in the
/// sandbox, over HTTP, with the file rewritten in place.
@Suite("Videos and drawings through the daemon", .onLane(.clients))
struct VideoDaemonTests {
  /// A daemon serving a folder that holds the corpus's `relative` as `name`, and its path.
  static func serving(
    _ relative: String, as name: String, _ extra: [String] = []
  ) async throws -> (TestDaemon, String) {
    let directory = TestDaemon.makeDirectory()
    let video = directory + "/" + name
    try Data(Corpus.bytes(relative)).write(to: URL(fileURLWithPath: video))
    let daemon = try await TestDaemon.start(
      ["--file-root", directory, "--allow-scheme", "file"] + extra, directory: directory)
    return (daemon, video)
  }

  @Test("a video becomes a thumbnail of its displayed shape, and a rewritten one the new picture")
  func httpAndRewrite() async throws {
    // Portrait, from a display matrix: 1080x720 stored, 720x1080 shown.
    let (daemon, video) = try await Self.serving(
      "video-valid/androidx-media/sample_rotate_and_reflect.mp4", as: "clip.mp4")
    defer { daemon.stop() }
    let target = "/v1/thumbnail?url=file://\(video)&w=96&h=96&format=png"
    let first = SocketClient.request(daemon.socket, "GET", target)
    #expect(SocketClient.status(of: first) == 200, "\(SocketClient.body(of: first))")
    let picture = try Thumbnailer().decodeFullResolution(.bytes(SocketClient.body(of: first)))
    #expect(picture.width == 64 && picture.height == 96)
    // The same name, another video (landscape): the next answer is of it, never the old one.
    try Data(Corpus.bytes("video-valid/imageio-test-images/cockatoo.mp4")).write(
      to: URL(fileURLWithPath: video))
    let later = Date().addingTimeInterval(5)
    try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: video)
    let second = SocketClient.request(daemon.socket, "GET", target)
    #expect(SocketClient.status(of: second) == 200)
    let fresh = try Thumbnailer().decodeFullResolution(.bytes(SocketClient.body(of: second)))
    #expect(fresh.width == 96 && fresh.height == 54)
    // Both made by the worker's server: one started for them, or a second when the first had
    // gone idle in between (half a second, on a loaded machine).
    #expect(daemon.metric(#"thumbd_video_frames_total{outcome="made"}"#) == 2)
    let servers = try #require(daemon.metric("thumbd_video_frame_servers_started_total"))
    #expect((1...2).contains(servers), "\(daemon.metrics)")
  }

  @Test(
    "a PDF and an SVG over HTTP are drawn by the worker, and each rewritten in place gives the new picture"
  )
  func drawingsAndRewrite() async throws {
    let directory = TestDaemon.makeDirectory()
    let daemon = try await TestDaemon.start(
      ["--file-root", directory, "--allow-scheme", "file"], directory: directory)
    defer { daemon.stop() }
    // Each file, its first and its rewritten bytes, and the 96-box sizes they give.
    let cases: [(String, [UInt8], (Int, Int), [UInt8], (Int, Int))] = [
      (
        "page.pdf", DrawingFixtures.pdf(width: 600, height: 400), (96, 64),
        DrawingFixtures.pdf(width: 400, height: 600), (64, 96)
      ),
      (
        "icon.svg", DrawingFixtures.svg(width: 200, height: 100), (96, 48),
        DrawingFixtures.svg(width: 100, height: 200), (48, 96)
      ),
    ]
    for (name, first, firstSize, second, secondSize) in cases {
      let path = directory + "/" + name
      try Data(first).write(to: URL(fileURLWithPath: path))
      let target = "/v1/thumbnail?url=file://\(path)&w=96&h=96&format=png"
      let before = SocketClient.request(daemon.socket, "GET", target)
      #expect(SocketClient.status(of: before) == 200, "\(SocketClient.body(of: before))")
      let old = try Thumbnailer().decodeFullResolution(.bytes(SocketClient.body(of: before)))
      #expect(old.width == firstSize.0 && old.height == firstSize.1, "\(name)")
      try Data(second).write(to: URL(fileURLWithPath: path))
      let later = Date().addingTimeInterval(5)
      try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: path)
      let after = SocketClient.request(daemon.socket, "GET", target)
      #expect(SocketClient.status(of: after) == 200)
      let new = try Thumbnailer().decodeFullResolution(.bytes(SocketClient.body(of: after)))
      #expect(new.width == secondSize.0 && new.height == secondSize.1, "\(name)")
    }
    #expect(daemon.metric(#"thumbd_video_frames_total{outcome="made"}"#) == 4)
  }

  @Test("a daemon killed outright leaves no worker server behind")
  func killedDaemon() async throws {
    let (daemon, video) = try await Self.serving(
      "video-valid/mdn-learning-area/rabbit320.webm", as: "clip.webm")
    let response = SocketClient.request(
      daemon.socket, "GET", "/v1/thumbnail?url=file://\(video)&w=96&h=96")
    #expect(SocketClient.status(of: response) == 200)
    // Its server waits idle for the next video; the daemon gets no chance to end it.
    let servers = "--serve\u{0}thumbd-\(daemon.pid)"
    #expect(DelegatedFixtures.processes(holding: servers) > 0)
    kill(daemon.pid, SIGKILL)
    _ = ChildProcess.wait(daemon.pid)
    await eventually("no server left") { DelegatedFixtures.processes(holding: servers) == 0 }
  }

  @Test("a damaged video is a typed error, not a failure of the daemon")
  func damaged() async throws {
    let (daemon, video) = try await Self.serving(
      "video-corrupt/androidx-media/invalid-bitstream.webm", as: "broken.webm")
    defer { daemon.stop() }
    let response = SocketClient.request(
      daemon.socket, "GET", "/v1/thumbnail?url=file://\(video)&w=96&h=96")
    #expect(
      SocketClient.status(of: response) == 415,
      "\(String(decoding: SocketClient.body(of: response), as: UTF8.self))")
    let health = SocketClient.request(daemon.socket, "GET", "/healthz")
    #expect(SocketClient.status(of: health) == 200)
  }

  @Test("video_frames=false refuses videos as unsupported, and no worker runs")
  func switchedOff() async throws {
    let (daemon, video) = try await Self.serving(
      "video-valid/mdn-learning-area/rabbit320.webm", as: "clip.webm", ["--video-frames=false"])
    defer { daemon.stop() }
    let response = SocketClient.request(
      daemon.socket, "GET", "/v1/thumbnail?url=file://\(video)&w=96&h=96")
    #expect(SocketClient.status(of: response) == 415)
    let body = String(decoding: SocketClient.body(of: response), as: UTF8.self)
    #expect(body.contains("unsupported_format") && body.contains("thumbd-frame"), "\(body)")
    #expect(!daemon.metrics.contains("thumbd_video_frames_total{"))
  }
}
