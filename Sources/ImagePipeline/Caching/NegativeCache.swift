import Synchronization

/// Remembers failures for a short time, so a broken source is not fetched and decoded again
/// by every request in a burst. With a lifetime of zero it remembers nothing.
final class NegativeCache<Key: Hashable & Sendable>: Sendable {
  private let seconds: Double
  private let entries = Mutex<[Key: (error: PipelineError, expires: ContinuousClock.Instant)]>([:])
  /// Bound on remembered failures; the oldest are dropped past it.
  private let capacity = 4096

  init(seconds: Double) { self.seconds = seconds }

  func failure(for key: Key) -> PipelineError? {
    guard seconds > 0 else { return nil }
    return entries.withLock { entries in
      guard let entry = entries[key] else { return nil }
      if entry.expires < .now {
        entries[key] = nil
        return nil
      }
      return entry.error
    }
  }

  func remember(_ error: PipelineError, for key: Key) {
    guard seconds > 0 else { return }
    entries.withLock { entries in
      if entries.count >= capacity {
        let now = ContinuousClock.now
        entries = entries.filter { $0.value.expires > now }
        if entries.count >= capacity,
          let oldest = entries.min(by: { $0.value.expires < $1.value.expires })
        {
          entries[oldest.key] = nil
        }
      }
      entries[key] = (error, .now.advanced(by: .milliseconds(Int64(seconds * 1000))))
    }
  }
}

extension Duration {
  /// The duration in seconds, as a Double.
  var seconds: Double {
    let (whole, fraction) = components
    return Double(whole) + Double(fraction) / 1e18
  }
}
