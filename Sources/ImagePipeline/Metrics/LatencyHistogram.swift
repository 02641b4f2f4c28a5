import Synchronization

/// A fixed-bucket latency histogram safe to update from any thread (Prometheus style: each
/// bucket counts observations at or below its bound).
public final class LatencyHistogram: Sendable {
  /// Upper bounds of the buckets in seconds; a last, unbounded bucket follows.
  public static let bounds: [Double] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
  ]

  /// Counts per bucket (not cumulative), plus the total and sum.
  public struct Snapshot: Sendable, Hashable {
    /// Observations per bucket, one more than `bounds` (the last is unbounded).
    public var counts: [Int]
    /// Number of observations.
    public var count: Int
    /// Sum of all observations, in seconds.
    public var sum: Double

    /// The value below which `fraction` of observations fall, by bucket upper bound.
    public func quantile(_ fraction: Double) -> Double {
      guard count > 0 else { return 0 }
      let target = Int((Double(count) * fraction).rounded(.up))
      var seen = 0
      for (i, c) in counts.enumerated() {
        seen += c
        if seen >= target { return i < bounds.count ? bounds[i] : .infinity }
      }
      return .infinity
    }
  }

  private let state = Mutex(
    Snapshot(
      counts: Array(repeating: 0, count: LatencyHistogram.bounds.count + 1), count: 0, sum: 0))

  /// Creates an empty histogram.
  public init() {}

  /// Records one observation in seconds.
  public func observe(_ seconds: Double) {
    let index = Self.bounds.firstIndex { seconds <= $0 } ?? Self.bounds.count
    state.withLock { state in
      state.counts[index] += 1
      state.count += 1
      state.sum += max(0, seconds)
    }
  }

  /// Reads the histogram.
  public func snapshot() -> Snapshot { state.withLock { $0 } }
}
