import Foundation
import ImagePipeline
import Testing
import ThumbClient
import ThumbProtocol
import ThumbSystem

@testable import Loopback
@testable import TestSupport

/// Previews through the real daemon: a progressive JPEG's first DC scans shown while the rest
/// of the file is still held at the origin, a HEIC's embedded thumbnail before its full decode,
/// and under randomised slot reuse never for another item or token, never twice, never after
/// the image, never unasked.
@Suite("Previews", .serialized, .onLane(.clients))
struct PreviewTests {
  typealias Items = SessionTests

  /// A progressive JPEG of `item`'s colour with fine texture (so its AC scans, which come
  /// after the DC ones, are most of the file).
  static func progressive(_ item: Int, width: Int, height: Int) throws -> [UInt8] {
    let (r, g, b) = Items.colour(of: item)
    var pixels = [UInt8](repeating: 0, count: width * height * 3)
    var random = SeededRandom(seed: UInt64(item) + 1)
    for index in 0..<(width * height) {
      let noise = Int(random.next() % 25) - 12
      pixels[index * 3] = UInt8(clamping: Int(r) + noise)
      pixels[index * 3 + 1] = UInt8(clamping: Int(g) + noise)
      pixels[index * 3 + 2] = UInt8(clamping: Int(b) + noise)
    }
    return try ImageEncoder.jpeg(
      Bitmap(pixels: pixels, width: width, height: height, channels: 3), quality: 92,
      progressive: true)
  }

  static func previews(_ log: SessionTests.EventLog) -> [ServerMessage.Image] {
    log.events.compactMap { if case .preview(let image) = $0 { image } else { nil } }
  }

  @Test(
    "a progressive JPEG's preview comes while its download is held at half, the image once the rest has come"
  )
  func progressiveBeforeHalf() async throws {
    let body = try Self.progressive(5, width: 1200, height: 900)
    var watch = PreviewPrefix()
    guard case .ready(let ready) = body.withUnsafeBytes({ watch.look(at: $0) }) else {
      Issue.record("no preview point in the fixture")
      return
    }
    let half = body.count / 2
    #expect(ready < half, "DC scans end at \(ready) of \(body.count)")
    let origin = try LoopbackOrigin { _ in .init(body: body, pauseAfterBytes: half) }.start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(["--allow-private"], driver: .inProcess)
    defer { daemon.stop() }
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    let log = SessionTests.EventLog(client)
    try client.load(
      slot: 2, item: "photo", token: 7, url: origin.url("/photo.jpg"), width: 96, height: 96,
      preview: true)
    await eventually("the preview") { !Self.previews(log).isEmpty }
    #expect(origin.held == 1, "the origin still holds the second half")
    #expect(log.images.isEmpty)
    origin.release()
    await eventually("the image") { log.images.count == 1 }
    let preview = try #require(Self.previews(log).first)
    let image = try #require(log.images.first)
    #expect(preview.slot == 2 && preview.item == "photo" && preview.token == 7)
    #expect(preview.format == "jpeg" && preview.cache == "")
    #expect(preview.width <= image.width && preview.height <= image.height)
    #expect(Items.item(shownBy: preview.data) == 5)
    #expect(Items.item(shownBy: image.data) == 5)
    guard case .preview = log.events.first else {
      Issue.record("the preview was not first: \(log.events)")
      return
    }
    #expect(daemon.metric("thumbd_previews_total") == 1)
    client.close()
    await log.finished()
  }

  @Test("a HEIC phone photo's embedded thumbnail arrives as the preview, then its full decode")
  func heicThumbnailFirst() async throws {
    let body = try Corpus.bytes("heif-valid/metadata-extractor/IMG_1034.heic")
    let origin = try LoopbackOrigin { _ in .init(body: body) }.start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(["--allow-private"], driver: .inProcess)
    defer { daemon.stop() }
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    let log = SessionTests.EventLog(client)
    try client.load(
      slot: 0, item: "heic", token: 1, url: origin.url("/IMG_1034.heic"), width: 512,
      height: 512, preview: true)
    await eventually("the image") { log.images.count == 1 }
    guard log.events.count == 2, case .preview(let preview) = log.events[0],
      case .image(let image) = log.events[1]
    else {
      Issue.record("not a preview, then the image: \(log.events)")
      return
    }
    // The thumbnail is smaller than the box: the preview is its size, the image the box's.
    #expect(preview.width < image.width && preview.height < image.height)
    #expect(image.width == 512 || image.height == 512)
    let aspect = (
      Double(preview.width) / Double(preview.height), Double(image.width) / Double(image.height)
    )
    #expect(abs(aspect.0 - aspect.1) < 0.05)
    // Without asking, none.
    try client.load(
      slot: 1, item: "heic", token: 1, url: origin.url("/IMG_1034.heic?again"), width: 256,
      height: 256)
    await eventually("the second image") { log.images.count == 2 }
    #expect(Self.previews(log).count == 1)
    client.close()
    await log.finished()
  }

  @Test(
    "600 random slot reuses over progressive items, some asking for previews: a preview only for its load's own item, token and rev, at most one, never after its image, never unasked"
  )
  func randomisedSlotReuse() async throws {
    let count = 24
    let bodies = try (0..<count).map { try Self.progressive($0, width: 480, height: 360) }
    let origin = try LoopbackOrigin { path in
      let name = path.split(separator: "/").last.map(String.init) ?? ""
      guard let n = Int(name.prefix { $0.isNumber }), n < count else { return .init(status: 404) }
      // Out of order, and some halted half way a moment: previews race their images.
      let delay = UInt32((n * 7919 + path.utf8.count * 31) % 4000)
      return .init(body: bodies[n], delayMicroseconds: delay)
    }.start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--cache-dir", ""], driver: .inProcess)
    defer { daemon.stop() }
    let raw = try ThumbClient(endpoint: .unix(daemon.socket), verifyTokens: false)
    let log = SessionTests.EventLog(raw)
    var generator = SeededRandom(seed: 20_261_203_33)
    let slots = 6
    var tokens = [Int](repeating: 0, count: slots)
    var loads: [String: (item: Int, rev: String?, preview: Bool)] = [:]
    var live: [Int: Int] = [:]
    for step in 0..<600 {
      let slot = Int.random(in: 0..<slots, using: &generator)
      if Int.random(in: 0..<100, using: &generator) < 85 || live[slot] == nil {
        let item = Int.random(in: 0..<count, using: &generator)
        tokens[slot] += 1
        let rev = [nil, "r1", "r2"][Int.random(in: 0..<3, using: &generator)]
        let preview = Int.random(in: 0..<10, using: &generator) < 7
        let size = [32, 48][Int.random(in: 0..<2, using: &generator)]
        // Query strings make most loads cold, so most reach the origin.
        let url = origin.url("/\(item).jpg?v=\(step % 40)")
        try raw.load(
          slot: slot, item: "item-\(item)", token: tokens[slot], url: url, width: size,
          height: size, rev: rev, preview: preview)
        loads["\(slot)/\(tokens[slot])"] = (item, rev, preview)
        live[slot] = tokens[slot]
        // Some loads are let finish before the next step, so previews and images land while
        // other slots move on around them.
        if Int.random(in: 0..<100, using: &generator) < 35 {
          let key = "\(slot)/\(tokens[slot])"
          await eventually("\(key)'s image") {
            log.images.contains { "\($0.slot)/\($0.token)" == key }
          }
        }
      } else if let token = live[slot] {
        try raw.cancel(slot: slot, token: token)
        live[slot] = nil
      }
    }
    await eventually("every load still bound has its image") {
      let delivered = Set(log.images.map { "\($0.slot)/\($0.token)" })
      return live.allSatisfy { delivered.contains("\($0.key)/\($0.value)") }
    }
    raw.close()
    await log.finished()
    var shown: Set<String> = []
    var previewed: Set<String> = []
    var lastToken: [Int: Int] = [:]
    for event in log.events {
      let (slot, token): (Int, Int)
      switch event {
      case .preview(let preview):
        (slot, token) = (preview.slot, preview.token)
        let key = "\(slot)/\(token)"
        let load = try #require(loads[key])
        #expect(load.preview, "a preview nobody asked for: \(key)")
        #expect(!shown.contains(key), "a preview after its image: \(key)")
        #expect(previewed.insert(key).inserted, "two previews: \(key)")
        #expect(preview.item == "item-\(load.item)" && preview.rev == load.rev, "\(key)")
        #expect(Items.item(shownBy: preview.data) == load.item, "\(key) shows another item")
      case .image(let image):
        (slot, token) = (image.slot, image.token)
        shown.insert("\(slot)/\(token)")
        #expect(Items.item(shownBy: image.data) == loads["\(slot)/\(token)"]?.item)
      default: continue
      }
      #expect(token >= lastToken[slot] ?? 0, "slot \(slot) went back to token \(token)")
      lastToken[slot] = token
    }
    #expect(previewed.count >= 50, "previews sent: \(previewed.count)")
  }
}
