import Synchronization

/// Everything a run observes, shared by the simulated clients. One lock: updates are a few
/// hundred per second.
public final class Measurements: Sendable {
  struct State {
    var latencies: [String: [Double]] = [:]
    var timeToVisible: [(at: Double, ms: Double)] = []
    /// Load to the first thing a cell could paint: its placeholder or preview, or else its
    /// image.
    var timeToFirstPixel: [Double] = []
    var placeholders = 0
    /// Loads whose first paint was their preview.
    var previewFirst = 0
    /// Load to preview, for every preview shown.
    var timeToPreview: [Double] = []
    /// When each preview was shown, with its source's origin path: set against the origin's
    /// transfer of that body.
    var previewArrivals: [(path: String, at: ContinuousClock.Instant)] = []
    /// Per outcome of the final image: load to first pixel, to preview (loads that had one)
    /// and to the image.
    var paints: [String: (firstPixel: [Double], preview: [Double], image: [Double])] = [:]
    var loads = 0
    var images = 0
    var wrongDeliveries = 0
    var undecodable = 0
    var wrongExamples: [String] = []
    var staleDeliveries = 0
    var staleExamples: [String] = []
    var clientStale = 0
    var superseded = 0
    var errors: [String: Int] = [:]
    var prefetched = 0
    var prefetchErrors = 0
    var floodAnnounced = 0
    var floodPrefetched = 0
    var floodFailed = 0
    var displayed: Set<Int> = []
    var requested: Set<String> = []
    var rss: [(at: Double, megabytes: Double)] = []
  }

  let state = Mutex(State())

  /// An empty record.
  public init() {}

  func countLoad(url: String) {
    state.withLock {
      $0.loads += 1
      $0.requested.insert(url)
    }
  }

  func countPrefetch(urls: [String]) {
    state.withLock { $0.requested.formUnion(urls) }
  }

  func recordImage(
    outcome: String, latencyMs: Double, timeToVisibleMs: Double?, at: Double, item: Int
  ) {
    state.withLock {
      $0.images += 1
      $0.latencies[outcome, default: []].append(latencyMs)
      if let ttv = timeToVisibleMs { $0.timeToVisible.append((at, ttv)) }
      $0.displayed.insert(item)
    }
  }

  /// What a cell painted first.
  enum FirstPaint { case placeholder, preview, image }

  /// A load's first paintable result arrived `ms` after it was made.
  func recordFirstPixel(ms: Double, kind: FirstPaint) {
    state.withLock {
      $0.timeToFirstPixel.append(ms)
      switch kind {
      case .placeholder: $0.placeholders += 1
      case .preview: $0.previewFirst += 1
      case .image: break
      }
    }
  }

  /// A preview was shown `ms` after its load; `path` is its source's path at the origin.
  func recordPreview(ms: Double, path: String?) {
    let now = ContinuousClock.now
    state.withLock {
      $0.timeToPreview.append(ms)
      if let path { $0.previewArrivals.append((path, now)) }
    }
  }

  /// A load's image was shown: its paint times, under the image's outcome.
  func recordPaint(outcome: String, firstPixelMs: Double, previewMs: Double?, imageMs: Double) {
    state.withLock {
      $0.paints[outcome, default: ([], [], [])].firstPixel.append(firstPixelMs)
      if let previewMs { $0.paints[outcome, default: ([], [], [])].preview.append(previewMs) }
      $0.paints[outcome, default: ([], [], [])].image.append(imageMs)
    }
  }

  func recordWrong(_ description: String, undecodable: Bool) {
    state.withLock {
      $0.wrongDeliveries += 1
      if undecodable { $0.undecodable += 1 }
      if $0.wrongExamples.count < 10 { $0.wrongExamples.append(description) }
    }
  }

  func recordStale(_ description: String) {
    state.withLock {
      $0.staleDeliveries += 1
      if $0.staleExamples.count < 10 { $0.staleExamples.append(description) }
    }
  }

  func recordError(code: String, latencyMs: Double) {
    state.withLock {
      $0.errors[code, default: 0] += 1
      $0.latencies["error", default: []].append(latencyMs)
    }
  }

  func recordSuperseded(latencyMs: Double) {
    state.withLock {
      $0.superseded += 1
      $0.latencies["cancelled", default: []].append(latencyMs)
    }
  }

  func countClientStale() { state.withLock { $0.clientStale += 1 } }

  func countPrefetchResult(ok: Bool) {
    state.withLock {
      if ok { $0.prefetched += 1 } else { $0.prefetchErrors += 1 }
    }
  }

  func countFloodAnnounced(_ items: Int) { state.withLock { $0.floodAnnounced += items } }

  func countFloodResult(ok: Bool) {
    state.withLock {
      if ok { $0.floodPrefetched += 1 } else { $0.floodFailed += 1 }
    }
  }

  func recordRSS(at: Double, bytes: Int) {
    state.withLock { $0.rss.append((at, Double(bytes) / 1_048_576)) }
  }

  /// Wrong deliveries so far.
  public var wrongDeliveries: Int { state.withLock { $0.wrongDeliveries } }
  /// Stale deliveries so far.
  public var staleDeliveries: Int { state.withLock { $0.staleDeliveries } }
  /// Loads issued so far.
  public var loads: Int { state.withLock { $0.loads } }
  /// Images shown so far.
  public var images: Int { state.withLock { $0.images } }
}

/// Percentiles of a sample, nearest-rank.
public struct Percentiles: Sendable, Hashable, Codable {
  /// Samples.
  public var count: Int
  /// Median, ms.
  public var p50: Double
  /// 95th percentile, ms.
  public var p95: Double
  /// 99th percentile, ms.
  public var p99: Double
  /// Largest, ms.
  public var max: Double

  /// Summarises `values` (milliseconds); zeros when empty.
  public init(_ values: [Double]) {
    let sorted = values.sorted()
    count = sorted.count
    func rank(_ q: Double) -> Double {
      guard !sorted.isEmpty else { return 0 }
      let index = Int((q * Double(sorted.count)).rounded(.up)) - 1
      return sorted[Swift.max(0, Swift.min(sorted.count - 1, index))]
    }
    p50 = rank(0.50)
    p95 = rank(0.95)
    p99 = rank(0.99)
    max = sorted.last ?? 0
  }
}
