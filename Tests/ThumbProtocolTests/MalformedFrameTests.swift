import Testing
import ThumbProtocol

@testable import TestSupport

/// Every malformed session input is refused where the bytes arrive, and says which kind it is
/// (docs/PROTOCOL.md, rule 8): bytes that are no message break the framing (the connection
/// closes); a message with a bad field is refused with what of it reads (its slot, item, token,
/// round), so the server can answer it there while the session goes on. Each case's message
/// names the field or reason the table gives.
@Suite("Malformed frames")
struct MalformedFrameTests {
  /// The error reading `bytes` gives, or nil when it reads as messages.
  static func error(reading bytes: [UInt8]) -> SessionFrameError? {
    var reader = SessionFrameReader(maxBodyBytes: Wire.clientBodyLimit)
    do throws(SessionFrameError) {
      for frame in try reader.feed(bytes) { _ = try ClientMessage(frame: frame) }
      return nil
    } catch {
      return error
    }
  }

  @Test(
    "bytes that are no message break the framing, naming why", arguments: MalformedFrames.framing)
  func framing(_ input: MalformedFrames.Framing) throws {
    let error = try #require(Self.error(reading: input.bytes), "accepted")
    #expect(error.breaksFraming, "\(error)")
    #expect(error.message.contains(input.blames), "\(error.message)")
  }

  @Test(
    "a message with a bad field is refused with its slot, item, token and round, naming the field",
    arguments: MalformedFrames.refused)
  func refused(_ input: MalformedFrames.Refused) throws {
    let error = try #require(Self.error(reading: input.bytes), "accepted")
    #expect(error.refused == input.expected, "\(error)")
    #expect(error.message.contains(input.blames), "\(error.message)")
    // Its answer goes where it points, with the protocol's code.
    guard
      case .error(let slot, let item, let token, let code, let message) =
        input.expected.reply(error.message)
    else {
      Issue.record("no error frame")
      return
    }
    #expect(slot == input.slot && item == input.item && token == input.token)
    #expect(code == Wire.Code.badMessage && message.contains(input.blames))
  }

  @Test("the table covers every op, every load field and the framing")
  func coverage() {
    #expect(MalformedFrames.framing.count >= 15 && MalformedFrames.refused.count >= 50)
    let text = MalformedFrames.refused.map(\.line).joined()
    for op in ["load", "cancel", "priority", "prefetch", "release"] {
      #expect(text.contains("\"op\":\"\(op)\""), "no malformed \(op)")
    }
    let blamed = Set(MalformedFrames.refused.map(\.blames))
    for field in [
      "slot", "item", "token", "url", "w", "h", "scale", "fit", "format", "quality", "colour",
      "priority", "rev", "preview", "round", "items",
    ] {
      #expect(blamed.contains(field), "no case blames \(field)")
    }
  }
}
