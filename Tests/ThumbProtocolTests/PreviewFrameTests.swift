import Testing
import ThumbProtocol

/// The `preview` field of `load` and the `preview` frame (docs/PROTOCOL.md).
@Suite struct PreviewFrameTests {
  static let box = ClientMessage.Box(width: 64, height: 64)

  @Test("a load's preview flag survives encode and decode; absent or null means false")
  func loadFlag() throws {
    for preview in [true, false] {
      let load = ClientMessage.load(
        .init(slot: 1, item: "i", token: 2, url: "http://o/a", box: Self.box, preview: preview))
      #expect(try ClientMessage(frame: load.frame) == load)
    }
    var header = ClientMessage.load(
      .init(slot: 1, item: "i", token: 2, url: "http://o/a", box: Self.box)
    ).frame.header
    header["preview"] = .null
    guard case .load(let load) = try ClientMessage(frame: SessionFrame(header: header)) else {
      Issue.record("not a load")
      return
    }
    #expect(!load.preview)
  }

  @Test("preview must be true or false: a string, a number or an object is a bad frame")
  func loadFlagTyped() throws {
    for value in [JSONValue.string("true"), .integer(1), .object([:])] {
      var header = ClientMessage.load(
        .init(slot: 1, item: "i", token: 2, url: "http://o/a", box: Self.box)
      ).frame.header
      header["preview"] = value
      #expect(throws: SessionFrameError.self) {
        try ClientMessage(frame: SessionFrame(header: header))
      }
    }
  }

  @Test("a preview frame carries slot, item, token, rev, format and size with its bytes; no cache")
  func frame() throws {
    let preview = ServerMessage.preview(
      .init(
        slot: 4, item: "photo", token: 9, format: "jpeg", width: 40, height: 30, cache: "",
        data: [0xFF, 0xD8, 1, 2], rev: "r3"))
    let frame = preview.frame
    #expect(frame.op == "preview")
    #expect(frame.header["cache"] == nil)
    #expect(frame.body == [0xFF, 0xD8, 1, 2])
    #expect(ServerMessage(frame: frame) == preview)
    // A client cannot send one.
    #expect(throws: SessionFrameError.self) { try ClientMessage(frame: frame) }
  }
}
