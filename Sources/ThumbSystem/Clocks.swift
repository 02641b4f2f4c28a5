#if canImport(Glibc)
  import Glibc
#endif

/// CLOCK_MONOTONIC: time that never steps back, for deadlines, timeouts and rates.
public enum MonotonicClock {
  /// Nanoseconds since an arbitrary point (boot).
  public static func nanoseconds() -> UInt64 {
    let now = reading(CLOCK_MONOTONIC)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
  }

  /// Seconds since the same point.
  public static func seconds() -> Double { Double(nanoseconds()) / 1e9 }
}

/// The real-time clock, in seconds since 1970: what HTTP dates and freshness deadlines are
/// measured against (a monotonic clock would not survive a restart in the disk cache).
public enum WallClock {
  /// Now.
  public static func now() -> Double {
    let now = reading(CLOCK_REALTIME)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
  }
}

/// One reading of `clock`.
private func reading(_ clock: clockid_t) -> timespec {
  var now = timespec()
  clock_gettime(clock, &now)
  return now
}
