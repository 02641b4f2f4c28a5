import ImagePipeline
import Synchronization
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// What the daemon knows about its storage, for logs, `/healthz` and `/metrics`: disk cache
/// faults as they happen, each kind logged the first time and then at most once a minute
/// (with how many were not logged), and a degraded state while faults keep coming.
public final class StorageHealth: Sendable {
  private struct State {
    var lastLogged: [String: UInt64] = [:]
    var suppressed: [String: Int] = [:]
    var lastFault: (kind: String, message: String, at: UInt64)?
  }

  /// Seconds after the last fault during which health reports the disk cache degraded.
  public let degradedWindow: Double
  /// Seconds between two log lines of one kind.
  public let logInterval: Double
  private let logger: Logger?
  private let state = Mutex(State())

  /// Creates the monitor; faults are logged to `logger`.
  public init(logger: Logger?, degradedWindow: Double = 60, logInterval: Double = 60) {
    self.logger = logger
    self.degradedWindow = degradedWindow
    self.logInterval = logInterval
  }

  /// Records a disk cache fault (the `DiskCache` `onFault` hook).
  public func record(_ report: DiskCache.FaultReport) {
    let kind = report.fault.rawValue
    let now = Self.now()
    let suppressed = state.withLock { state -> Int? in
      state.lastFault = (kind, report.message, now)
      if let last = state.lastLogged[kind], Double(now &- last) / 1e9 < logInterval {
        state.suppressed[kind, default: 0] += 1
        return nil
      }
      state.lastLogged[kind] = now
      defer { state.suppressed[kind] = 0 }
      return state.suppressed[kind] ?? 0
    }
    guard let suppressed else { return }
    logger?.log(
      report.fault == .corrupt ? .warn : .error, "disk_cache_fault",
      ["kind": kind, "message": report.message, "not_logged_since_last": String(suppressed)])
  }

  /// Why the disk cache counts as degraded now (a fault in the last `degradedWindow`
  /// seconds), or nil when it is healthy.
  public var degradation: String? {
    state.withLock { state in
      guard let fault = state.lastFault, Double(Self.now() &- fault.at) / 1e9 < degradedWindow
      else { return nil }
      return "disk cache: \(fault.kind): \(fault.message)"
    }
  }

  private static func now() -> UInt64 { MonotonicClock.nanoseconds() }
}
