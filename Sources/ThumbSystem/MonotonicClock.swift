#if canImport(Glibc)
  import Glibc
#endif

/// CLOCK_MONOTONIC: time that never steps back, for deadlines, timeouts and rates.
public enum MonotonicClock {
  /// Nanoseconds since an arbitrary point (boot).
  public static func nanoseconds() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
  }

  /// Seconds since the same point.
  public static func seconds() -> Double { Double(nanoseconds()) / 1e9 }
}
