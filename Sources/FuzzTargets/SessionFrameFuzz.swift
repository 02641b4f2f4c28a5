import ThumbProtocol
import ThumbServer

extension FuzzTarget {
  /// The session frame reader and the client-frame checks behind it.
  static let sessionFrames = FuzzTarget(
    name: "session-frames",
    covers:
      "SessionFrameReader, ClientMessage and SessionState: the same frames and error whole or a byte at a time; a frame re-serialised reads back equal; a message re-encoded decodes equal; the session state runs the messages and gives all its memory back",
    maxLength: 40_000
  ) { bytes in
    let whole = FrameParse(chunks: [bytes[...]])
    let split = FrameParse(chunks: pieces(of: bytes))
    require((whole.error == nil) == (split.error == nil), "errors differ when split")
    if whole.error == nil { require(whole.frames == split.frames, "frames differ when split") }
    var messages: [ClientMessage] = []
    for frame in split.frames {
      require(frame.body.count <= Wire.clientBodyLimit, "body over the limit")
      let again = FrameParse(chunks: [frame.serialized()[...]])
      require(again.error == nil && again.frames == [frame], "frame does not read back")
      guard let message = try? ClientMessage(frame: frame) else { continue }
      require(
        (try? ClientMessage(frame: message.frame)) == message, "\(message) does not round-trip")
      messages.append(message)
    }
    let outcome = ServerFuzzing.session(messages)
    require(outcome.memoryReturned, "session memory not given back")
  }
}

/// The frames a reader returns for the chunks, and the error that stopped it.
struct FrameParse {
  var frames: [SessionFrame] = []
  var error: SessionFrameError?

  init(chunks: [ArraySlice<UInt8>]) {
    var reader = SessionFrameReader(maxBodyBytes: Wire.clientBodyLimit)
    do throws(SessionFrameError) {
      for chunk in chunks { frames += try reader.feed(chunk) }
    } catch {
      self.error = error
    }
  }
}
