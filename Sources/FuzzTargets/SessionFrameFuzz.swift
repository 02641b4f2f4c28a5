import ThumbClient
@_spi(Fuzzing) import ThumbServer

extension FuzzTarget {
  /// The session frame reader and the client-frame checks behind it.
  static let sessionFrames = FuzzTarget(
    name: "session-frames",
    covers:
      "SessionFrameReader and ClientRequest: the same frames and error whole or a byte at a time; a frame re-serialised reads back equal; every frame is checked without a crash",
    maxLength: 40_000
  ) { bytes in
    let whole = FrameParse(chunks: [bytes[...]])
    let split = FrameParse(chunks: pieces(of: bytes))
    require((whole.error == nil) == (split.error == nil), "errors differ when split")
    if whole.error == nil { require(whole.frames == split.frames, "frames differ when split") }
    for frame in split.frames {
      require(frame.body.count <= 65536, "body over the limit")
      let again = FrameParse(chunks: [frame.serialized()[...]])
      require(again.error == nil && again.frames == [frame], "frame does not read back")
      if case .success(let summary) = ServerFuzzing.clientRequest(frame) {
        require(!summary.isEmpty, "empty summary")
      }
    }
  }
}

/// The frames a reader returns for the chunks, and the error that stopped it.
struct FrameParse {
  var frames: [SessionFrame] = []
  var error: SessionFrameError?

  init(chunks: [ArraySlice<UInt8>]) {
    var reader = SessionFrameReader(maxBodyBytes: 65536)
    do throws(SessionFrameError) {
      for chunk in chunks { frames += try reader.feed(chunk) }
    } catch {
      self.error = error
    }
  }
}
