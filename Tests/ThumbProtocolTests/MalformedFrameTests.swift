import Testing
import ThumbProtocol

@testable import TestSupport

/// Every malformed session frame is refused where the bytes arrive: by the frame reader (with
/// the server's body limit) or by the message decoder, each with a message for `bad_frame`.
@Suite("Malformed frames")
struct MalformedFrameTests {
  @Test(
    "each malformed input is a SessionFrameError with a message", arguments: MalformedFrames.all)
  func refused(_ bytes: [UInt8]) {
    var reader = SessionFrameReader(maxBodyBytes: Wire.clientBodyLimit)
    do {
      let frames = try reader.feed(bytes)
      for frame in frames { _ = try ClientMessage(frame: frame) }
      Issue.record(
        "accepted: \(String(decoding: bytes.prefix(60), as: UTF8.self).debugDescription)")
    } catch {
      #expect(!error.message.isEmpty)
    }
  }

  @Test("the table covers every op and the framing")
  func coverage() {
    #expect(MalformedFrames.all.count >= 50)
    let text = MalformedFrames.lines.joined()
    for op in ["load", "cancel", "priority", "prefetch", "release"] {
      #expect(text.contains("\"op\":\"\(op)\""), "no malformed \(op)")
    }
  }
}
