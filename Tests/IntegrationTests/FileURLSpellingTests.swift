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
/// `%25`. A name's bytes need not be UTF-8: `%E9` names a Latin-1 "é", which is not `%C3%A9`.
@Suite("File URL spelling", .onLane(.clients))
struct FileURLSpellingTests {
  @Test(
    "the same URL names the same file over HTTP and in a session; %25 names a literal %, %E9 a Latin-1 byte"
  )
  func sameFileInBothDoors() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let root = directory + "/pictures"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    // Files whose names a decoding would confuse: `x%41.png` (red) and `xA.png` (blue); and
    // "café.png" in Latin-1 (green) and in UTF-8 (yellow). Issue 52: the Latin-1 name was
    // refused as "not valid UTF-8".
    let latin1 = "caf\\xE9.png"
    let colours: [(name: [UInt8], colour: (UInt8, UInt8, UInt8))] = [
      (Array("x%41.png".utf8), (220, 20, 20)),
      (Array("xA.png".utf8), (20, 20, 220)),
      (Array("caf".utf8) + [0xE9] + Array(".png".utf8), (20, 220, 20)),
      (Array("café.png".utf8), (220, 220, 20)),
    ]
    for (name, (r, g, b)) in colours {
      let pixels = [UInt8]((0..<(16 * 16)).flatMap { _ in [r, g, b] })
      let png = try ImageEncoder.png(Bitmap(pixels: pixels, width: 16, height: 16, channels: 3))
      #expect(ByteNames.write(Data(png), to: Array((root + "/").utf8) + name))
    }
    let daemon = try await TestDaemon.start(
      ["--file-root", root, "--allow-scheme", "file"], driver: .inProcess, directory: directory)
    defer { daemon.stop() }
    func name(shownBy data: [UInt8]) -> String? {
      guard let bitmap = try? Thumbnailer().decodeFullResolution(.bytes(data)) else { return nil }
      let (red, green) = (bitmap.pixels[0] > 128, bitmap.pixels[1] > 128)
      return red ? (green ? "café.png" : "x%41.png") : (green ? latin1 : "xA.png")
    }
    // URL as written -> the file it names.
    let cases = [
      ("file://\(root)/x%41.png", "xA.png"), ("file://\(root)/x%2541.png", "x%41.png"),
      ("file://\(root)/xA.png", "xA.png"), ("file://\(root)/x%2541%2Epng", "x%41.png"),
      ("file://\(root)/caf%E9.png", latin1), ("file://\(root)/caf%C3%A9.png", "café.png"),
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
