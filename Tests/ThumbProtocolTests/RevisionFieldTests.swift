import Testing
import ThumbProtocol

/// The `rev` field of `load` and prefetch items: carried both ways, bounded by
/// `Wire.maxRevisionLength`.
@Suite struct RevisionFieldTests {
  static let box = ClientMessage.Box(width: 64, height: 64)

  func load(rev: String?) -> ClientMessage {
    .load(.init(slot: 1, item: "i", token: 2, url: "http://o/a", box: Self.box, rev: rev))
  }

  @Test("a load's rev and a prefetch item's rev survive encode and decode; an image echoes it")
  func roundTrip() throws {
    for message in [
      load(rev: "v7"), load(rev: nil),
      .prefetch(
        .init(round: 3, items: [.init(item: "a", url: "http://o/a", rev: "r1")], box: Self.box)),
    ] {
      #expect(try ClientMessage(frame: message.frame) == message)
    }
    let image = ServerMessage.image(
      .init(
        slot: 1, item: "i", token: 2, format: "png", width: 1, height: 1, cache: "miss",
        data: [1], rev: "v7"))
    #expect(ServerMessage(frame: image.frame) == image)
  }

  @Test("rev is 1...maxRevisionLength bytes: longer or empty is a bad frame")
  func bounded() throws {
    let longest = String(repeating: "r", count: Wire.maxRevisionLength)
    #expect(try ClientMessage(frame: load(rev: longest).frame) == load(rev: longest))
    for refused in [longest + "r", ""] {
      #expect(throws: SessionFrameError.self) { try ClientMessage(frame: load(rev: refused).frame) }
    }
  }
}
