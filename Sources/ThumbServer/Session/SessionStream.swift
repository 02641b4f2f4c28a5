import ThumbProtocol

/// A session's bytes: frames in, through the `SessionDriver`, frames out. What the session
/// handler does, without the connection, so tests can drive the daemon's session with bytes
/// and read back exactly what it would write.
struct SessionStream {
  /// What one batch of bytes gave.
  enum Received {
    /// Complete frames were read (`count`, maybe 0); `output` is the replies to write.
    case frames(count: Int, output: [UInt8])
    /// A frame broke the framing: `output` is the `bad_frame` frame to write before closing.
    /// Replies to earlier frames of the same batch are not sent.
    case failed(SessionFrameError, output: [UInt8])
  }

  private var reader = SessionFrameReader(maxBodyBytes: Wire.clientBodyLimit)
  /// The session's rules.
  let driver: SessionDriver

  /// A stream over `driver`.
  init(driver: SessionDriver) { self.driver = driver }

  /// Bytes of an incomplete frame held.
  var bufferedBytes: Int { reader.bufferedBytes }

  /// Reads what `bytes` completes and applies each message; a message that breaks a rule is
  /// answered where it points (`bad_message`) and the next one is read. After `.failed` (bytes
  /// that are no message) the session is closed: its work has been given up.
  mutating func receive(_ bytes: ArraySlice<UInt8>) -> Received {
    var output: [UInt8] = []
    do throws(SessionFrameError) {
      let frames = try reader.feed(bytes)
      for frame in frames {
        let replies: [ServerMessage]
        do throws(SessionFrameError) {
          replies = driver.apply(try ClientMessage(frame: frame))
        } catch {
          guard let refused = error.refused else { throw error }
          replies = driver.refuse(refused, because: error.message)
        }
        for message in replies { output += message.frame.serialized() }
      }
      return .frames(count: frames.count, output: output)
    } catch {
      driver.close()
      return .failed(error, output: ServerMessage.badFrame(error).frame.serialized())
    }
  }

  /// A piece of work came back: the frames to write (none when its binding moved on).
  func finished(_ done: FinishedWork) -> [UInt8] {
    driver.finished(done).flatMap { $0.frame.serialized() }
  }
}
