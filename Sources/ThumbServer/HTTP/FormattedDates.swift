import ImagePipeline
import Synchronization

/// HTTP dates by the second, formatted once each and kept (at most `capacity`; then the memo
/// starts over), for header values that repeat on every response of a source.
final class FormattedDates: Sendable {
  private let texts = Mutex<[Int: String]>([:])
  private let capacity = 4096

  /// `seconds` (since 1970) as an IMF-fixdate.
  func text(for seconds: Double) -> String {
    let key = seconds.isFinite ? Int(max(-1e12, min(1e12, seconds)).rounded(.down)) : 0
    if let text = texts.withLock({ $0[key] }) { return text }
    let text = HTTPDate.format(Double(key))
    texts.withLock { texts in
      if texts.count >= capacity { texts.removeAll(keepingCapacity: true) }
      texts[key] = text
    }
    return text
  }
}
