import ImagePipeline
import Synchronization

/// The `Date` of responses (RFC 9110, section 6.6.1), formatted once a second rather than per
/// response, and kept as the bytes of its header line: the memory-hit path writes tens of
/// thousands a second.
enum ResponseDate {
  private static let cache = Mutex<(second: Int, line: [UInt8])>((-1, []))

  /// `Date: <now as an IMF-fixdate>\r\n`.
  static var headerLine: [UInt8] {
    let second = Int(WallClock.now())
    return cache.withLock { cache in
      if cache.second != second {
        cache = (second, Array("Date: \(HTTPDate.format(Double(second)))\r\n".utf8))
      }
      return cache.line
    }
  }
}
