import Foundation
import ImagePipeline
import Testing
import ThumbClient
import ThumbProtocol
import ThumbSystem
import ThumbWire

@testable import Loopback
@testable import TestSupport

/// Placeholders through the real daemon: made from the pixels of thumbnails it renders, kept
/// per source across restarts, answered over HTTP, and sent in sessions before the image under
/// the images' identity rule, checked against randomised slot reuse.
@Suite("Placeholders", .serialized, .onLane(.clients))
struct PlaceholderTests {
  typealias Items = SessionTests

  static func json(_ body: [UInt8]) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
  }

  @Test(
    "HTTP: /v1/placeholder makes one when unknown, answers it from the index after, and from the disk after a restart without asking the origin; placeholder=1 names it"
  )
  func http() async throws {
    let origin = try Items.makeOrigin()
    defer { origin.stop() }
    let directory = TestDaemon.makeDirectory()
    // Processes: the restart needs the first one's cache lock let go, as its exit does.
    let daemon = try await TestDaemon.start(["--allow-private"], directory: directory)
    let url = origin.url("/item/7.png")
    let encoded = PercentEncoding.encode(url)
    let first = SocketClient.get(daemon.socket, "/v1/placeholder?url=\(encoded)")
    #expect(first.status == 200)
    let made = try #require(Self.json(SocketClient.body(of: first.response)))
    let hash = try #require((made["thumbhash"] as? String).flatMap(Base64.decodeStandard))
    #expect((5...25).contains(hash.count))
    let (r, g, b) = Items.colour(of: 7)
    #expect(made["colour"] as? String == String(format: "#%02x%02x%02x", r, g, b))
    #expect(made["width"] as? Int == 24 && made["height"] as? Int == 24)
    // With a box: the size a thumbnail for that box has.
    let boxed = SocketClient.get(daemon.socket, "/v1/placeholder?w=12&h=10&url=\(encoded)")
    let sized = try #require(Self.json(SocketClient.body(of: boxed.response)))
    #expect(sized["width"] as? Int == 10 && sized["height"] as? Int == 10)
    let thumbnail = SocketClient.get(
      daemon.socket, "/v1/thumbnail?w=20&h=20&placeholder=1&url=\(encoded)")
    #expect(
      SocketClient.header("X-Thumbd-Placeholder", in: thumbnail.response) == made["thumbhash"]
        as? String)
    let asked = origin.requests.count
    daemon.stop()
    let restarted = try await TestDaemon.start(["--allow-private"], directory: directory)
    defer { restarted.stop() }
    let again = SocketClient.get(restarted.socket, "/v1/placeholder?url=\(encoded)")
    #expect(
      Self.json(SocketClient.body(of: again.response))?["thumbhash"] as? String == made["thumbhash"]
        as? String)
    #expect(origin.requests.count == asked, "the placeholder came from the disk")
    // A purge takes it with the thumbnails.
    _ = SocketClient.request(restarted.socket, "DELETE", "/v1/source?url=\(encoded)")
    let afterPurge = origin.requests.count
    #expect(SocketClient.get(restarted.socket, "/v1/placeholder?url=\(encoded)").status == 200)
    #expect(origin.requests.count > afterPurge, "made again after the purge")
  }

  @Test(
    "sessions: a known placeholder comes first, with the final image's exact size and the item's colour"
  )
  func sessionFrame() async throws {
    let origin = try Items.makeOrigin()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(["--allow-private"], driver: .inProcess)
    defer { daemon.stop() }
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    let log = SessionTests.EventLog(client)
    try client.load(
      slot: 0, item: "cold", token: 1, url: origin.url("/item/3.png"), width: 20, height: 20,
      format: .png)
    await eventually("the cold load's image") { log.images.count == 1 }
    // Nothing was known when it was asked; a placeholder the render itself left may still
    // come, but only before the image.
    guard case .image = log.events.last else {
      Issue.record("the image was not last: \(log.events)")
      return
    }
    let known = log.events.count
    try client.load(
      slot: 1, item: "warm", token: 1, url: origin.url("/item/3.png"), width: 9, height: 9,
      format: .png)
    await eventually("the warm load's image") { log.images.count == 2 }
    let events = Array(log.events.dropFirst(known))
    guard events.count == 2, case .placeholder(let placeholder) = events[0],
      case .image(let image) = events[1]
    else {
      Issue.record("not a placeholder then an image: \(events)")
      return
    }
    #expect(placeholder.slot == 1 && placeholder.item == "warm" && placeholder.token == 1)
    #expect(placeholder.width == image.width && placeholder.height == image.height)
    let (r, g, b) = Items.colour(of: 3)
    #expect(placeholder.colour == String(format: "#%02x%02x%02x", r, g, b))
    client.close()
    await log.finished()
  }

  @Test(
    "2000 random slot reuses over warm and cold items and revisions: placeholders only for the load's own item, token and rev, never after its image, always the final image's size"
  )
  func randomisedSlotReuse() async throws {
    let origin = try Items.makeOrigin()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(["--allow-private"], driver: .inProcess)
    defer { daemon.stop() }
    // Half the items warmed, so both paths (found, not found) run.
    for item in stride(from: 0, to: Items.itemCount, by: 2) {
      let url = PercentEncoding.encode(origin.url("/item/\(item).png"))
      #expect(SocketClient.get(daemon.socket, "/v1/placeholder?url=\(url)").status == 200)
    }
    let raw = try ThumbClient(endpoint: .unix(daemon.socket), verifyTokens: false)
    let log = SessionTests.EventLog(raw)
    var generator = SeededRandom(seed: 20_261_203)
    let slots = 8
    var tokens = [Int](repeating: 0, count: slots)
    var loads: [String: Int] = [:]
    var revs: [String: String?] = [:]
    var live: [Int: Int] = [:]
    for step in 0..<2000 {
      let slot = Int.random(in: 0..<slots, using: &generator)
      if Int.random(in: 0..<100, using: &generator) < 80 || live[slot] == nil {
        let item = Int.random(in: 0..<Items.itemCount, using: &generator)
        tokens[slot] += 1
        let size = [12, 16, 20][Int.random(in: 0..<3, using: &generator)]
        // Some loads name a revision: a placeholder is kept per source and revision, so one
        // made for another revision (or for none) must never answer it.
        let rev = [nil, nil, "r1", "r2"][Int.random(in: 0..<4, using: &generator)]
        try raw.load(
          slot: slot, item: "item-\(item)", token: tokens[slot],
          url: origin.url("/item/\(item).png"), width: size, height: size - 2, format: .png,
          rev: rev)
        loads["\(slot)/\(tokens[slot])"] = item
        revs["\(slot)/\(tokens[slot])"] = rev
        live[slot] = tokens[slot]
      } else if let token = live[slot] {
        try raw.cancel(slot: slot, token: token)
        live[slot] = nil
      }
      if step % 100 == 99 { await Task.yield() }
    }
    await eventually("every load still bound has its image") {
      let delivered = Set(log.images.map { "\($0.slot)/\($0.token)" })
      return live.allSatisfy { delivered.contains("\($0.key)/\($0.value)") }
    }
    raw.close()
    await log.finished()
    var lastToken: [Int: Int] = [:]
    var placed: [String: ServerMessage.Placeholder] = [:]
    var shown: Set<String> = []
    var placeholders = 0
    for event in log.events {
      let (slot, token): (Int, Int)
      switch event {
      case .placeholder(let placeholder):
        (slot, token) = (placeholder.slot, placeholder.token)
        let key = "\(slot)/\(token)"
        placeholders += 1
        #expect(!shown.contains(key), "a placeholder after its image: \(key)")
        #expect(placed.updateValue(placeholder, forKey: key) == nil, "two placeholders: \(key)")
        let item = try #require(loads[key])
        #expect(placeholder.item == "item-\(item)")
        #expect(placeholder.rev == revs[key] ?? nil, "\(key): the load's revision")
        let (r, g, b) = Items.colour(of: item)
        #expect(placeholder.colour == String(format: "#%02x%02x%02x", r, g, b), "\(key)")
      case .image(let image):
        (slot, token) = (image.slot, image.token)
        let key = "\(slot)/\(token)"
        shown.insert(key)
        if let placeholder = placed[key] {
          #expect(placeholder.width == image.width && placeholder.height == image.height)
        }
      default: continue
      }
      #expect(token >= lastToken[slot] ?? 0, "slot \(slot) went back to token \(token)")
      lastToken[slot] = token
    }
    #expect(placeholders >= 200, "placeholders sent: \(placeholders)")
  }
}
