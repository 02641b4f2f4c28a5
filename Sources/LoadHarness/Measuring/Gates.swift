/// Pass/fail rules for CI: wrong deliveries always fail a run; latency objectives fail it when
/// given.
public struct Gates: Sendable, Hashable {
  /// Largest acceptable P95 latency of shown images, ms.
  public var maxLatencyP95Ms: Double?
  /// Largest acceptable P95 time to visible, ms.
  public var maxTimeToVisibleP95Ms: Double?

  /// Gates with the given objectives.
  public init(maxLatencyP95Ms: Double? = nil, maxTimeToVisibleP95Ms: Double? = nil) {
    self.maxLatencyP95Ms = maxLatencyP95Ms
    self.maxTimeToVisibleP95Ms = maxTimeToVisibleP95Ms
  }

  /// Every gate `report` fails, as messages; empty when it passes.
  public func failures(of report: Report) -> [String] {
    var failures: [String] = []
    if report.wrongDeliveries > 0 { failures.append("\(report.wrongDeliveries) wrong deliveries") }
    if report.staleDeliveries > 0 { failures.append("\(report.staleDeliveries) stale deliveries") }
    if let limit = maxLatencyP95Ms, report.latencyMs.p95 > limit {
      failures.append("latency p95 \(report.latencyMs.p95) ms > \(limit) ms")
    }
    if let limit = maxTimeToVisibleP95Ms, report.timeToVisibleMs.p95 > limit {
      failures.append("time-to-visible p95 \(report.timeToVisibleMs.p95) ms > \(limit) ms")
    }
    return failures
  }

  /// The process exit status for `report`: 0 passed, 1 a gate failed.
  public func exitStatus(for report: Report) -> Int32 { failures(of: report).isEmpty ? 0 : 1 }
}
