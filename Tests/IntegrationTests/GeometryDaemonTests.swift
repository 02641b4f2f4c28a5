import Foundation
import ImagePipeline
import Testing
import ThumbClient
import ThumbProtocol
import ThumbServer
import ThumbSystem
import ThumbWire

@testable import Loopback
@testable import TestSupport

/// Geometry options through the real daemon: signed paths with options in random orders, the
/// query form, and what each shares.
@Suite("Geometry through the daemon", .serialized, .onLane(.clients))
struct GeometryDaemonTests {
  /// Independent choices, each of whose values changes the bytes of an 80x40 cover of a
  /// portrait photo, turned or not (none equals a combination of the others).
  static let dimensions: [[String?]] = [
    [nil, "g:no", "g:so", "g:fp:0.5:0.6"],
    [nil, "rot:90"],
    [nil, "fl:1", "fl:0:1"],
    [nil, "pd:3", "pd:3/bg:ff0000"],
    [nil, "c:0.6:0.6:we"],
  ]

  @Test("requests differing in one option never share an entry or an ETag; reordered ones do")
  func keys() async throws {
    let setup = try await SignedPathTests.Setup()
    defer { setup.stop() }
    let source = PercentEncoding.encode(setup.origin.url("/photo.jpg"))
    var random = SeededRandom(seed: UInt64(Date().timeIntervalSince1970))
    var etags: [[String?]: String] = [:]
    var decodes = setup.decodes
    var choice: [String?] = []
    for round in 0..<32 {
      // Every other round repeats the last combination in another order.
      if round % 2 == 0 {
        choice = Self.dimensions.map { $0[Int(random.next() % UInt64($0.count))] }
      }
      var options = (["rs:fill:80:40"] + choice.compactMap { $0 })
        .flatMap { $0.split(separator: "/").map(String.init) }
      options.shuffle(using: &random)
      let answer = setup.get(
        SignedPathTests.signing.signedPath(
          "/" + options.joined(separator: "/") + "/plain/" + source))
      #expect(answer.status == 200, "\(options)")
      let etag = try #require(SocketClient.header("ETag", in: Array(answer.head.utf8)))
      let cache = SocketClient.header("X-Thumbd-Cache", in: Array(answer.head.utf8))
      let before = decodes
      decodes = setup.decodes
      if let known = etags[choice] {
        #expect(etag == known, "the same options in another order: \(options)")
        #expect(cache == "memory" && decodes == before, "served from the same entry")
      } else {
        #expect(!etags.values.contains(etag), "a new combination shares no ETag: \(options)")
        #expect(cache == "miss" && decodes == before + 1, "a new combination is its own work")
        etags[choice] = etag
      }
    }
  }

  @Test("the query form names the same options, and imgproxy's examples get imgproxy's sizes")
  func queryForm() async throws {
    let setup = try await SignedPathTests.Setup(["--allow-unsigned-tcp"])
    defer { setup.stop() }
    let url = PercentEncoding.encode(setup.origin.url("/photo.jpg"))
    let query = setup.get(
      "/v1/thumbnail?url=\(url)&w=100&h=50&fit=cover&gravity=ea:5:0&rotate=90&flip=1"
        + "&padding=2:4&background=00ff00&format=png")
    #expect(query.status == 200)
    #expect(SignedPathTests.size(query.body).map { [$0.0, $0.1] } == [108, 54])
    let path = setup.get(
      SignedPathTests.signing.signedPath(
        "/bg:0:255:0/pd:2:4/fl:1/rot:90/g:ea:5:0/rs:fill:100:50/plain/\(url)@png"))
    #expect(path.body == query.body, "the same image by either form")
    let bad = setup.get("/v1/thumbnail?url=\(url)&w=100&h=50&rotate=45")
    #expect(bad.status == 400 && String(decoding: bad.body, as: UTF8.self).contains("90"))
    // imgproxy's documented shapes: extend to the box, and rt:auto.
    for (options, size) in [
      ("rs:fit:300:300:0:1/bg:255:255:255", [300, 300]),
      ("rs:auto:100:300", [100, 300]),
      ("rs:fit:100:100/pd:10", [100, 120]),
      ("rs:fill:100:100/g:sm", [100, 100]),
      ("c:200:100/rs:fit:0:50", [100, 50]),
    ] {
      let answer = setup.get(SignedPathTests.signing.signedPath("/\(options)/plain/\(url)@png"))
      #expect(answer.status == 200, "\(options)")
      #expect(SignedPathTests.size(answer.body).map { [$0.0, $0.1] } == size, "\(options)")
    }
  }
}

extension GeometryDaemonTests {
  @Test("a session box's options are the path form's; a bad one fails that slot only")
  func sessionOptions() async throws {
    let directory = TestDaemon.makeDirectory()
    let photo = directory + "/photo.jpg"
    try Data(SignedPathTests.photo).write(to: URL(fileURLWithPath: photo))
    let daemon = try await TestDaemon.start(
      ["--file-root", directory, "--allow-scheme", "file"], driver: .inProcess,
      directory: directory)
    defer { daemon.stop() }
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    defer { client.close() }
    try client.load(
      slot: 0, item: "bad", token: 1, url: "file://" + photo, width: 64, height: 64,
      options: "rot:45")
    try client.load(
      slot: 1, item: "turned", token: 2, url: "file://" + photo, width: 100, height: 50,
      fit: .cover, format: .png, options: "rot:90/pd:2/bg:ffffff")
    var failed: String?
    var shown: [UInt8]?
    for await event in client.events {
      switch event {
      case .error(let slot, _, _, _, let message) where slot == 0: failed = message
      case .image(let image) where image.slot == 1: shown = image.data
      default: break
      }
      if failed != nil && shown != nil { break }
    }
    #expect(failed?.contains("90") == true)
    let bytes = try #require(shown)
    #expect(SignedPathTests.size(bytes).map { [$0.0, $0.1] } == [104, 54])
    let path = SocketClient.request(
      daemon.socket, "GET",
      "/v1/thumbnail?url=file://\(photo)&w=100&h=50&fit=cover&format=png&rotate=90&padding=2"
        + "&background=ffffff")
    #expect(SocketClient.body(of: path) == bytes, "the same image by HTTP")
  }
}

extension GeometryDaemonTests {
  @Test("watermarks come from the config by name: placed, keyed, and refused when unknown")
  func watermarks() async throws {
    let directory = TestDaemon.makeDirectory()
    let mark = directory + "/mark.png"
    let red = (0..<(16 * 16)).flatMap { _ in [255, 0, 0, 255] as [UInt8] }
    try Data(try ImageEncoder.png(Bitmap(pixels: red, width: 16, height: 16, channels: 4)))
      .write(to: URL(fileURLWithPath: mark))
    let setup = try await SignedPathTests.Setup(["--watermark", "logo=" + mark])
    defer { setup.stop() }
    let url = PercentEncoding.encode(setup.origin.url("/photo.jpg"))
    func get(_ options: String) -> (status: Int, head: String, body: [UInt8]) {
      setup.get(SignedPathTests.signing.signedPath("/\(options)/plain/\(url)@png"))
    }
    let plain = get("rs:fit:100:100")
    let marked = get("rs:fit:100:100/wm:1:nowe:0:0:0")
    let named = get("rs:fit:100:100/wm:1:nowe:0:0:0:logo")
    #expect(plain.status == 200 && marked.status == 200 && named.status == 200)
    #expect(marked.body != plain.body && named.body == marked.body)
    let image = try Thumbnailer().decodeFullResolution(.bytes(marked.body))
    let at = { (x: Int, y: Int) in
      let start = (y * image.width + x) * image.channels
      return Array(image.pixels[start..<start + 3])
    }
    #expect(at(0, 0) == [255, 0, 0] && at(15, 15) == [255, 0, 0] && at(16, 16) != [255, 0, 0])
    #expect(
      SocketClient.header("ETag", in: Array(marked.head.utf8))
        != SocketClient.header("ETag", in: Array(plain.head.utf8)))
    let unknown = get("rs:fit:100:100/wm:1:ce:0:0:0:seal")
    #expect(unknown.status == 400 && String(decoding: unknown.body, as: UTF8.self).contains("seal"))
    let bad = get("rs:fit:100:100/wm:2")
    #expect(bad.status == 400)
    #expect(get("rs:fit:100:100/wm:0").body == plain.body, "opacity 0 is no watermark")
  }

  @Test("a daemon with no watermarks refuses wm, naming the config key")
  func noWatermarks() async throws {
    let setup = try await SignedPathTests.Setup()
    defer { setup.stop() }
    let url = PercentEncoding.encode(setup.origin.url("/photo.jpg"))
    let answer = setup.get(SignedPathTests.signing.signedPath("/wm:0.5/plain/\(url)"))
    #expect(
      answer.status == 400 && String(decoding: answer.body, as: UTF8.self).contains("watermarks"))
  }
}

extension GeometryDaemonTests {
  /// imgproxy's documented forms of each option (its processing guide), with the size its
  /// rules give the 1080x1350 photo.
  static let documented: [(String, [Int])] = [
    ("pr:sharp/rs:fill:300:400:0/g:sm", [300, 400]),
    ("resize:fill:300:400:0/gravity:sm", [300, 400]),
    ("rs:force:100:200/padding:10", [120, 220]),
    ("size:300:300:0:1/background:255:0:0", [300, 300]),
    ("rt:fill-down/w:200/h:100", [200, 100]),
    ("rt:auto/w:300/h:100", [80, 100]),
    ("w:200/enlarge:1/extend:1:so", [200, 250]),
    ("rs:fit:2000:2000:1", [1600, 2000]),
    ("crop:0.5:0.5:nowe/w:100", [100, 125]),
    ("c:300:200:fp:0.5:0.5/w:150", [150, 100]),
    ("g:noea:0.1:0.1/rs:fill:100:100", [100, 100]),
    ("rotate:90/w:100", [100, 80]),
    ("rot:270/flip:1:1/h:100", [125, 100]),
    ("trim:10/w:100", [100, 125]),
    ("t:10:ffffff:1:1/w:100", [100, 125]),
    ("blur:3/w:100", [100, 125]),
    ("sharpen:0.5/w:100", [100, 125]),
    ("pixelate:4/w:100", [100, 125]),
    ("watermark:0.5:soea:10:10:0.2/w:100", [100, 125]),
    ("wm:1:re:0.1:0.1/w:100", [100, 125]),
    ("ar:1/bg:/w:100", [100, 125]),
  ]

  @Test("imgproxy's documented option forms get 200 and the size its rules give")
  func documentedExamples() async throws {
    let directory = TestDaemon.makeDirectory()
    let mark = directory + "/mark.png"
    let grey = (0..<(40 * 20)).flatMap { _ in [90, 90, 90, 200] as [UInt8] }
    try Data(try ImageEncoder.png(Bitmap(pixels: grey, width: 40, height: 20, channels: 4)))
      .write(to: URL(fileURLWithPath: mark))
    let setup = try await SignedPathTests.Setup([
      "--watermark", "default=" + mark, "--preset", "sharp=sh:0.7",
    ])
    defer { setup.stop() }
    let url = PercentEncoding.encode(setup.origin.url("/photo.jpg"))
    for (options, size) in Self.documented {
      let answer = setup.get(SignedPathTests.signing.signedPath("/\(options)/plain/\(url)@png"))
      #expect(
        answer.status == 200,
        "\(options): \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
      #expect(SignedPathTests.size(answer.body).map { [$0.0, $0.1] } == size, "\(options)")
    }
  }
}
