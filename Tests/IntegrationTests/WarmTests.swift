import Foundation
import Testing

@testable import Loopback
@testable import TestSupport

/// `thumbd warm` fills what browsers will ask for: after it, a request with Chromium's
/// `Accept` is a disk hit, whether a daemon held the cache during the warm or not.
@Suite("thumbd warm", .onLane(.clients))
struct WarmTests {
  static let browserAccept = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"

  /// A tree with a name a URL must percent-encode, a non-ASCII one and a nested folder.
  static func makeTree(in directory: String) throws -> (root: String, names: [String]) {
    let root = directory + "/Pictures"
    try FileManager.default.createDirectory(
      atPath: root + "/2024/summer", withIntermediateDirectories: true)
    let names = ["with space.jpg", "2024/café.png", "2024/summer/IMG_0001.JPG"]
    let sources = [
      "photo/coil/normal.jpg", "png-valid/image-png/rgba.png", "photo/sdwebimage/TestJFIF.jpg",
    ]
    for (name, source) in zip(names, sources) {
      try FileManager.default.copyItem(atPath: Corpus.path(source), toPath: root + "/" + name)
    }
    return (root, names)
  }

  /// The URL `pathlib.Path.as_uri()` gives, as a query value.
  static func target(_ path: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~/")
    let uri = "file://" + path.addingPercentEncoding(withAllowedCharacters: allowed)!
    allowed.remove("/")
    return "/v1/thumbnail?url=" + uri.addingPercentEncoding(withAllowedCharacters: allowed)!
      + "&w=64&h=64"
  }

  private func cacheHeader(_ daemon: TestDaemon, _ path: String, accept: String) -> String? {
    let response = SocketClient.request(
      daemon.socket, "GET", Self.target(path), headers: ["Accept: " + accept])
    let status = SocketClient.status(of: response)
    guard status == 200, let cache = SocketClient.header("X-Thumbd-Cache", in: response) else {
      return "status \(status): \(String(decoding: response.prefix(300), as: UTF8.self))"
    }
    return cache
  }

  @Test("with the daemon running during the warm, browser and plain requests are disk hits")
  func throughRunningDaemon() async throws {
    let directory = TestDaemon.makeDirectory()
    let tree = try Self.makeTree(in: directory)
    // No memory cache: a hit can only come from the disk.
    let daemon = try await TestDaemon.start(
      ["--file-root", tree.root, "--memory-limit", "0"], directory: directory)
    defer { daemon.stop() }
    let warm = try await ChildProcess.runThumbd([
      "warm", tree.root, "--size", "64x64", "--cache-dir", directory + "/cache", "--socket",
      daemon.socket, "--disk-limit", "1GiB",
    ])
    #expect(warm.status == 0, "\(warm.standardError)")
    #expect(warm.standardError.contains("thumbd warm: 6 made, 0 failed"), "\(warm.standardError)")
    for name in tree.names {
      for accept in [Self.browserAccept, "image/jpeg,*/*"] {
        #expect(cacheHeader(daemon, tree.root + "/" + name, accept: accept) == "disk", "\(name)")
      }
    }
  }

  @Test(
    "with no daemon running, warm runs its own on the cache; a daemon started after finds every entry"
  )
  func ownDaemon() async throws {
    let directory = TestDaemon.makeDirectory()
    let tree = try Self.makeTree(in: directory)
    let warm = try await ChildProcess.runThumbd([
      "warm", tree.root + "/with space.jpg", tree.root + "/2024", "--size", "64x64",
      "--cache-dir", directory + "/cache", "--jobs", "3",
    ])
    #expect(warm.status == 0, "\(warm.standardError)")
    let daemon = try await TestDaemon.start(["--file-root", tree.root], directory: directory)
    defer { daemon.stop() }
    for name in tree.names {
      #expect(cacheHeader(daemon, tree.root + "/" + name, accept: Self.browserAccept) == "disk")
    }
    // What warm did not fill is made on request: a different size.
    let other = SocketClient.get(
      daemon.socket, Self.target(tree.root + "/with space.jpg").replacing("w=64", with: "w=32"))
    #expect(String(decoding: other.response, as: UTF8.self).contains("X-Thumbd-Cache: miss"))
  }

  @Test("usage: --formats avif without auto_avif, and an unknown serve flag, are errors")
  func usage() async throws {
    let directory = TestDaemon.makeDirectory()
    let tree = try Self.makeTree(in: directory)
    for extra in [["--formats", "avif"], ["--formats", "gif"], ["--disk-limt", "1GiB"]] {
      let outcome = try await ChildProcess.runThumbd(
        ["warm", tree.root, "--size", "64x64", "--cache-dir", directory + "/cache"] + extra)
      #expect(outcome.status == 2, "\(extra): \(outcome.standardError)")
    }
  }
}
