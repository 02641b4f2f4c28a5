import ImagePipeline
import Synchronization
import ThumbSystem

/// The `Date` of responses (RFC 9110, section 6.6.1), formatted once a second rather than per
/// response, and kept as the bytes of its header line: the memory-hit path writes tens of
/// thousands a second.
enum ResponseDate {
  private static let cache = Mutex<(second: Int, line: [UInt8])>((-1, []))

  /// Appends `Date: <now as an IMF-fixdate>\r\n` to `bytes`, copied under the lock (no
  /// reference to the shared line leaves it).
  static func appendHeaderLine(to bytes: inout [UInt8]) {
    let second = Self.second()
    cache.withLock { cache in
      if cache.second != second {
        cache = (second, Array("Date: \(HTTPDate.format(Double(second)))\r\n".utf8))
      }
      bytes.append(contentsOf: cache.line)
    }
  }

  /// The wall-clock second a `Date` made now would name.
  static func second() -> Int { Int(WallClock.now()) }
}
