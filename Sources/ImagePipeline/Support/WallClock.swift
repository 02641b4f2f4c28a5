#if canImport(Glibc)
  import Glibc
#endif

/// The real-time clock, in seconds since 1970: what HTTP dates and freshness deadlines are
/// measured against (a monotonic clock would not survive a restart in the disk cache).
package enum WallClock {
  /// Now.
  package static func now() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
  }
}
