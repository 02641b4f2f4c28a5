import Synchronization

/// What every session's announced prefetch items cost together, bounded: a session queues
/// the items it has not started yet, up to 256 open rounds of a 16 KiB frame each (about 4 MiB
/// of strings, 10 MiB with the bookkeeping), so a thousand sessions would otherwise hold
/// gigabytes. One session may hold 2 MiB (some 7,000 items with 100-byte URLs: look-ahead
/// enough for any list). One per server, shared by the sessions of every event loop.
public final class SessionMemory: Sendable {
  /// Bytes all sessions' prefetch items may hold.
  public let limit: Int
  /// Bytes one session's prefetch items may hold.
  let perSession: Int
  private let taken = Atomic<Int>(0)

  /// Bytes taken now.
  var used: Int { taken.load(ordering: .relaxed) }

  /// Bounds of `limit` bytes for all sessions and `perSession` (at most `limit`) for one.
  public init(limit: Int = 64 << 20, perSession: Int = 2 << 20) {
    self.limit = limit
    self.perSession = min(perSession, limit)
  }

  /// What one announced item costs: its strings and the bookkeeping around them.
  static func cost(item: String, url: String, rev: String? = nil) -> Int {
    item.utf8.count + url.utf8.count + (rev?.utf8.count ?? 0) + 160
  }

  /// Takes `bytes` for a session already holding `held`, unless a bound would be passed.
  func take(_ bytes: Int, holding held: Int) -> Bool {
    guard held + bytes <= perSession else { return false }
    var current = taken.load(ordering: .relaxed)
    while current + bytes <= limit {
      let (exchanged, original) = taken.compareExchange(
        expected: current, desired: current + bytes, ordering: .relaxed)
      if exchanged { return true }
      current = original
    }
    return false
  }

  func give(_ bytes: Int) { taken.subtract(bytes, ordering: .relaxed) }
}
