import Foundation
import ImagePipeline
import Testing
import ThumbClient
import ThumbSystem

@testable import Loopback
@testable import TestSupport

/// `colour=srgb|keep` against the real daemon: HTTP parameter, config default, session field,
/// separate cache entries, and the colour metrics.
@Suite("Colour over HTTP and sessions", .serialized, .onLane(.clients))
struct ColourDaemonTests {
  /// A daemon serving a Display P3 photo from a file root.
  private static func start(_ extra: [String] = []) async throws -> (TestDaemon, String) {
    let directory = TestDaemon.makeDirectory()
    let photo = directory + "/p3.jpg"
    try Data(Corpus.bytes("icc/sdwebimage/SDWebImageHighLevelDiagram.jpeg")).write(
      to: URL(fileURLWithPath: photo))
    let daemon = try await TestDaemon.start(
      ["--file-root", directory, "--allow-scheme", "file"] + extra, driver: .inProcess,
      directory: directory)
    return (daemon, "/v1/thumbnail?url=file://\(photo)&w=64&h=64&format=jpeg")
  }

  private static let iccMarker = Array("ICC_PROFILE".utf8)

  @Test("colour=keep and srgb are two entries; keep carries the profile, srgb none")
  func httpParameter() async throws {
    let (daemon, target) = try await Self.start()
    defer { daemon.stop() }
    let srgb = SocketClient.request(daemon.socket, "GET", target)
    let keep = SocketClient.request(daemon.socket, "GET", target + "&colour=keep")
    #expect(SocketClient.status(of: srgb) == 200)
    #expect(SocketClient.status(of: keep) == 200)
    #expect(SocketClient.body(of: srgb).firstRange(of: Self.iccMarker) == nil)
    #expect(SocketClient.body(of: keep).firstRange(of: Self.iccMarker) != nil)
    #expect(SocketClient.header("etag", in: srgb) != SocketClient.header("etag", in: keep))
    #expect(daemon.metric("thumbd_memory_cache_entries") == 2)
    #expect(daemon.metric("thumbd_colour_profiles_total{outcome=\"converted\"}") == 1)
    #expect(daemon.metric("thumbd_colour_profiles_total{outcome=\"kept\"}") == 1)
    #expect(daemon.metric("thumbd_colour_transforms") ?? 0 >= 1)
    #expect(daemon.metric("thumbd_colour_transform_bytes") ?? 0 > 0)
    let named = SocketClient.request(daemon.socket, "GET", target + "&colour=srgb")
    #expect(SocketClient.header("x-thumbd-cache", in: named) == "memory")
    let bad = SocketClient.request(daemon.socket, "GET", target + "&colour=cmyk")
    #expect(SocketClient.status(of: bad) == 400)
    #expect(String(decoding: SocketClient.body(of: bad), as: UTF8.self).contains("srgb or keep"))
  }

  @Test("the colour config key sets the default a request can still override")
  func configDefault() async throws {
    let (daemon, target) = try await Self.start(["--colour", "keep"])
    defer { daemon.stop() }
    let byDefault = SocketClient.request(daemon.socket, "GET", target)
    #expect(SocketClient.body(of: byDefault).firstRange(of: Self.iccMarker) != nil)
    let srgb = SocketClient.request(daemon.socket, "GET", target + "&colour=srgb")
    #expect(SocketClient.body(of: srgb).firstRange(of: Self.iccMarker) == nil)
  }

  @Test("a session load names its colour")
  func sessionField() async throws {
    let (daemon, target) = try await Self.start()
    defer { daemon.stop() }
    let url = String(target.split(separator: "=", maxSplits: 1)[1].prefix { $0 != "&" })
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    try client.load(
      slot: 0, item: "p3", token: 1, url: url, width: 64, height: 64, format: .jpeg,
      colour: "keep")
    var image: ThumbClient.Image?
    for await event in client.events {
      if case .image(let shown) = event {
        image = shown
        break
      }
    }
    #expect(image.map { $0.data.firstRange(of: Self.iccMarker) != nil } == true)
  }

  @Test("cmyk_profile set empty keeps the formula: the default profile never loads over it")
  func cmykProfileConfig() async throws {
    let directory = TestDaemon.makeDirectory()
    let cmyk = directory + "/cmyk.jpg"
    try Data(Corpus.bytes("jpeg-valid/sharp/Channel_digital_image_CMYK_color_no_profile.jpg"))
      .write(to: URL(fileURLWithPath: cmyk))
    let target = "/v1/thumbnail?url=file://\(cmyk)&w=64&h=64&format=png"
    // Processes: the CMYK profile is the codecs' process-wide setting, which every
    // in-process daemon of the test process would share.
    func thumbnail(_ extra: [String]) async throws -> [UInt8] {
      let daemon = try await TestDaemon.start(
        ["--file-root", directory, "--allow-scheme", "file"] + extra, directory: directory)
      defer { daemon.stop() }
      let response = SocketClient.request(daemon.socket, "GET", target)
      #expect(SocketClient.status(of: response) == 200)
      return SocketClient.body(of: response)
    }
    let standard = try await thumbnail([])
    let formula = try await thumbnail(["--cmyk-profile", "", "--cache-dir", directory + "/c2"])
    #expect(!standard.isEmpty && !formula.isEmpty)
    #expect(!standard.elementsEqual(formula), "the formula and the standard profile differ")
  }
}
