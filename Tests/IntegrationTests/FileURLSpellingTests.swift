import Foundation
import ImagePipeline
import Testing
import ThumbClient
import ThumbSystem
import ThumbWire

@testable import Loopback
@testable import TestSupport

/// A `url` is a URL in both doors (issue 52: a session's `file:///…/x%41.png` loaded `xA.png`
/// and looked like a silent rewrite). Its percent-escapes are decoded once, as RFC 8089 reads a
/// file URL, after the query string's own decoding in HTTP and from the JSON string as it is in
/// a session, so the same URL names the same file in both. A name with a `%` in it is written
/// `%25`.
@Suite("File URL spelling")
struct FileURLSpellingTests {
  @Test("the same URL names the same file over HTTP and in a session; %25 names a literal %")
  func sameFileInBothDoors() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let root = directory + "/pictures"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    // Two files whose names a decoding would confuse: `x%41.png` (red) and `xA.png` (blue).
    let colours: [String: (UInt8, UInt8, UInt8)] = [
      "x%41.png": (220, 20, 20), "xA.png": (20, 20, 220),
    ]
    for (name, (r, g, b)) in colours {
      let pixels = [UInt8]((0..<(16 * 16)).flatMap { _ in [r, g, b] })
      let png = try ImageEncoder.png(Bitmap(pixels: pixels, width: 16, height: 16, channels: 3))
      try Data(png).write(to: URL(fileURLWithPath: root + "/" + name))
    }
    let daemon = try await TestDaemon.start(
      ["--file-root", root, "--allow-scheme", "file"], directory: directory)
    defer { daemon.stop() }
    func name(shownBy data: [UInt8]) -> String? {
      guard let bitmap = try? Thumbnailer().decodeFullResolution(.bytes(data)) else { return nil }
      let red = Int(bitmap.pixels[0])
      return red > 128 ? "x%41.png" : "xA.png"
    }
    // URL as written -> the file it names.
    let cases = [
      ("file://\(root)/x%41.png", "xA.png"), ("file://\(root)/x%2541.png", "x%41.png"),
      ("file://\(root)/xA.png", "xA.png"), ("file://\(root)/x%2541%2Epng", "x%41.png"),
    ]
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    let log = SessionTests.EventLog(client)
    for (index, (url, named)) in cases.enumerated() {
      let http = SocketClient.get(
        daemon.socket, "/v1/thumbnail?w=8&h=8&format=png&url=" + PercentEncoding.encode(url))
      #expect(http.status == 200, "\(url)")
      #expect(name(shownBy: SocketClient.body(of: http.response)) == named, "HTTP \(url)")
      try client.load(
        slot: index, item: "case-\(index)", token: 1, url: url, width: 8, height: 8, format: .png)
    }
    await eventually("every session load's image") { log.images.count == cases.count }
    for image in log.images {
      let (url, named) = cases[image.slot]
      #expect(name(shownBy: image.data) == named, "session \(url)")
    }
    client.close()
    await log.finished()
  }
}
