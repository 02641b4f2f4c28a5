import Synchronization
import ThumbSystem

/// When the synthetic origin's items change (`--mutate RATE`): a seeded schedule of changes,
/// one every `1 / rate` seconds from the start of the run, each to an item drawn from
/// `items`. The origin serves each item's revision as of now; the checker asks when the
/// revision a thumbnail shows stopped being current.
public final class Mutations: Sendable {
  /// Changes per second.
  public let rate: Double
  /// Items that may change.
  public let items: Range<Int>
  private let started: ContinuousClock.Instant
  private struct Schedule {
    var random: SeededRandom
    /// Change times per item, in seconds since the start, oldest first.
    var changes: [Int: [Double]] = [:]
    /// Changes drawn so far.
    var drawn = 0
  }
  private let schedule: Mutex<Schedule>

  /// A schedule of `rate` changes per second over `items`, drawn from `seed`.
  public init(rate: Double, items: Range<Int>, seed: UInt64) {
    self.rate = rate
    self.items = items
    started = .now
    schedule = Mutex(Schedule(random: SeededRandom(seed: seed ^ 0x6D75_7461_7465)))
  }

  /// Seconds since the schedule started.
  public var elapsed: Double { started.duration(to: .now).seconds }

  /// The revision of `item` at `time` (seconds since the start): how many changes it had.
  public func revision(of item: Int, at time: Double) -> Int {
    changes(of: item, until: time).count
  }

  /// When revision `revision` of `item` stopped being current (the time of its next
  /// change), or nil while it is current at `time`.
  public func superseded(_ item: Int, revision: Int, at time: Double) -> Double? {
    let changes = changes(of: item, until: time)
    return revision < changes.count ? changes[revision] : nil
  }

  private func changes(of item: Int, until time: Double) -> [Double] {
    guard rate > 0, !items.isEmpty else { return [] }
    return schedule.withLock { schedule in
      // Draw every change due by `time`; bounded by the run's length times the rate.
      while Double(schedule.drawn + 1) / rate <= time {
        schedule.drawn += 1
        let changed = items.lowerBound + Int(schedule.random.next() % UInt64(items.count))
        schedule.changes[changed, default: []].append(Double(schedule.drawn) / rate)
      }
      return (schedule.changes[item] ?? []).filter { $0 <= time }
    }
  }
}
