import ImagePipeline
import Synchronization

/// The `Date` of responses (RFC 9110, section 6.6.1), formatted once a second rather than per
/// response: the memory-hit path writes tens of thousands a second.
enum ResponseDate {
  private static let cache = Mutex<(second: Int, text: String)>((-1, ""))

  /// Now, as an IMF-fixdate.
  static var now: String {
    let seconds = WallClock.now()
    let second = Int(seconds)
    return cache.withLock { cache in
      if cache.second != second { cache = (second, HTTPDate.format(Double(second))) }
      return cache.text
    }
  }
}
