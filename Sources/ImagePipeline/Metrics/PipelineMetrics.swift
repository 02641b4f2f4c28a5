import Synchronization

/// Counters the pipeline keeps while it works; `snapshot()` reads them all at once.
public final class PipelineMetrics: Sendable {
  /// A point-in-time copy of every counter.
  public struct Snapshot: Sendable, Hashable {
    /// Requests made to the pipeline.
    public var requests: Int
    /// Requests answered from the memory cache.
    public var memoryHits: Int
    /// Requests answered from the disk cache.
    public var diskHits: Int
    /// Requests that started new work.
    public var misses: Int
    /// Subscriptions that joined work already in flight (either stage).
    public var coalescedJoins: Int
    /// Origin fetches started, and the bytes they returned.
    public var originFetches: Int
    /// Bytes returned by origin fetches.
    public var originBytes: Int
    /// Decodes started.
    public var decodes: Int
    /// Jobs stopped because every subscriber left.
    public var cancelledWork: Int
    /// Desktop thumbnail jobs (`DesktopJobs`) started on a decode thread.
    public var desktopJobs: Int
    /// Results dropped at delivery because the slot had moved on.
    public var staleDrops: Int
    /// Thumbnails not written to the disk cache because too many writes were pending.
    public var diskWritesSkipped: Int
    /// Revalidations of stale sources by result: "unchanged" (a 304, or the same bytes),
    /// "changed" (new content, old thumbnails dropped), "error" (the origin failed).
    public var revalidations: [String: Int]
    /// Stale entries served (`stale_if_error`, `stale_while_revalidate`).
    public var staleServed: Int
    /// Previews made (a JPEG's EXIF thumbnail or first DC scans, a HEIF's thumbnail).
    public var previews: Int
    /// Sources found changed (a file's stamp moved, an origin's validators changed).
    public var sourceChanges: Int
    /// Purges asked for.
    public var purges: Int
    /// Failed requests by error kind.
    public var errors: [String: Int]
    /// Decodes by what their colour step did (`ProfileOutcome` raw values; `none` not counted).
    public var profiles: [String: Int]
    /// Latency per stage: "queue" (waiting for a decode thread), "fetch", "decode", "encode",
    /// "total" (request to response).
    public var latencies: [String: LatencyHistogram.Snapshot]
  }

  /// Stage names used in `latencies`.
  public static let stages = ["queue", "fetch", "decode", "encode", "total"]
  private let histograms: [String: LatencyHistogram] = Dictionary(
    uniqueKeysWithValues: PipelineMetrics.stages.map { ($0, LatencyHistogram()) })

  private let requests = Atomic<Int>(0)
  private let memoryHits = Atomic<Int>(0)
  private let diskHits = Atomic<Int>(0)
  private let misses = Atomic<Int>(0)
  private let coalescedJoins = Atomic<Int>(0)
  private let originFetches = Atomic<Int>(0)
  private let originBytes = Atomic<Int>(0)
  private let decodes = Atomic<Int>(0)
  private let cancelledWork = Atomic<Int>(0)
  private let desktopJobs = Atomic<Int>(0)
  private let staleDrops = Atomic<Int>(0)
  private let diskWritesSkipped = Atomic<Int>(0)
  private let errors = Mutex<[String: Int]>([:])
  private let revalidations = Mutex<[String: Int]>([:])
  private let profiles = Mutex<[String: Int]>([:])
  private let staleServed = Atomic<Int>(0)
  private let previews = Atomic<Int>(0)
  private let sourceChanges = Atomic<Int>(0)
  private let purges = Atomic<Int>(0)

  /// Creates zeroed counters.
  public init() {}

  func countRequest() { requests.add(1, ordering: .relaxed) }
  func countMemoryHit() { memoryHits.add(1, ordering: .relaxed) }
  func countDiskHit() { diskHits.add(1, ordering: .relaxed) }
  func countMiss() { misses.add(1, ordering: .relaxed) }
  func countJoin() { coalescedJoins.add(1, ordering: .relaxed) }
  func countFetch(bytes: Int) {
    originFetches.add(1, ordering: .relaxed)
    originBytes.add(bytes, ordering: .relaxed)
  }
  func countDecode() { decodes.add(1, ordering: .relaxed) }
  func countCancelledWork() { cancelledWork.add(1, ordering: .relaxed) }
  func countDesktopJob() { desktopJobs.add(1, ordering: .relaxed) }
  /// Counts a result dropped because its slot no longer shows that item and token.
  public func countStaleDrop() { staleDrops.add(1, ordering: .relaxed) }
  func countDiskWriteSkipped() { diskWritesSkipped.add(1, ordering: .relaxed) }
  /// Results a revalidation can have, as `revalidations` names them.
  enum Revalidation: String { case unchanged, changed, error }
  func countRevalidation(_ result: Revalidation) {
    revalidations.withLock { $0[result.rawValue, default: 0] += 1 }
  }
  func countStaleServed() { staleServed.add(1, ordering: .relaxed) }
  func countPreview() { previews.add(1, ordering: .relaxed) }
  func countSourceChange() { sourceChanges.add(1, ordering: .relaxed) }
  func countPurge() { purges.add(1, ordering: .relaxed) }
  func countProfile(_ outcome: ProfileOutcome) {
    guard outcome != .none else { return }
    profiles.withLock { $0[outcome.rawValue, default: 0] += 1 }
  }
  func countError(_ kind: String) { errors.withLock { $0[kind, default: 0] += 1 } }
  func observe(_ stage: String, _ seconds: Double) { histograms[stage]?.observe(seconds) }

  /// Reads every counter.
  public func snapshot() -> Snapshot {
    Snapshot(
      requests: requests.load(ordering: .relaxed), memoryHits: memoryHits.load(ordering: .relaxed),
      diskHits: diskHits.load(ordering: .relaxed), misses: misses.load(ordering: .relaxed),
      coalescedJoins: coalescedJoins.load(ordering: .relaxed),
      originFetches: originFetches.load(ordering: .relaxed),
      originBytes: originBytes.load(ordering: .relaxed), decodes: decodes.load(ordering: .relaxed),
      cancelledWork: cancelledWork.load(ordering: .relaxed),
      desktopJobs: desktopJobs.load(ordering: .relaxed),
      staleDrops: staleDrops.load(ordering: .relaxed),
      diskWritesSkipped: diskWritesSkipped.load(ordering: .relaxed),
      revalidations: revalidations.withLock { $0 },
      staleServed: staleServed.load(ordering: .relaxed),
      previews: previews.load(ordering: .relaxed),
      sourceChanges: sourceChanges.load(ordering: .relaxed),
      purges: purges.load(ordering: .relaxed),
      errors: errors.withLock { $0 },
      profiles: profiles.withLock { $0 },
      latencies: histograms.mapValues { $0.snapshot() })
  }
}
