import Foundation

/// The result of a run: what docs/THUMBLOAD.md documents as the JSON schema.
public struct Report: Sendable, Codable {
  /// One stampede's dedup figures.
  public struct Stampede: Sendable, Codable, Hashable {
    /// Clients asking at once.
    public var clients: Int
    /// Distinct sources asked for.
    public var uniqueSources: Int
    /// Origin requests for them.
    public var originFetches: Int
    /// Clients that got the right image.
    public var delivered: Int
    /// Clients that got an error or a wrong image.
    public var failed: Int
  }

  /// The flooding client's figures: prefetch the server finished with capacity visible work
  /// left over.
  public struct Flood: Sendable, Codable, Hashable {
    /// Items announced in prefetch rounds.
    public var announced: Int
    /// Items reported prefetched.
    public var prefetched: Int
    /// Items reported failed.
    public var failed: Int
  }

  /// Work spent on items that were cancelled before they were shown.
  public struct CancelledWork: Sendable, Codable, Hashable {
    /// Loads superseded (their cell recycled) before their image arrived.
    public var loadsSuperseded: Int
    /// Coalesced jobs the server stopped because every subscriber had left.
    public var workStopped: Int
    /// Sources downloaded but never shown.
    public var wastedFetches: Int
    /// Their bytes.
    public var wastedBytes: Int
    /// Decodes the server started during the run.
    public var decodes: Int
  }

  /// When a load's cell could paint something, per outcome of its final image.
  public struct Paint: Sendable, Codable, Hashable {
    /// Load to the first thing painted (placeholder, preview or image).
    public var firstPixel: Percentiles
    /// Load to the preview, for the loads that had one.
    public var preview: Percentiles
    /// Load to the image.
    public var image: Percentiles
  }

  /// Stale results dropped.
  public struct StaleDropped: Sendable, Codable, Hashable {
    /// By the server before sending.
    public var server: Int
    /// By the client's display-time check.
    public var client: Int
  }

  /// Scenarios run, joined by `+`.
  public var scenario: String
  /// The system under test.
  public var target: String
  /// The seed.
  public var seed: UInt64
  /// Wall-clock seconds of the whole run.
  public var durationS: Double
  /// Virtual lists.
  public var lists: Int
  /// Items per list.
  public var itemsPerList: Int
  /// Cells per viewport.
  public var slots: Int
  /// Items prefetched ahead; 0 when off.
  public var prefetchWindow: Int
  /// Items the flooding client kept in prefetch.
  public var prefetchFlood: Int
  /// `cold`, `warm` or `index`.
  public var cache: String
  /// Whether loads asked for previews.
  public var preview: Bool
  /// Shown images whose decoded item differs from the item their slot holds. Must be 0.
  public var wrongDeliveries: Int
  /// Up to ten of them, described.
  public var wrongExamples: [String]
  /// Shown images of the right item at a revision older than the freshness bound allows
  /// (with `--mutate`). Must be 0.
  public var staleDeliveries: Int
  /// Up to ten of them, described.
  public var staleExamples: [String]
  /// Item changes per second at the origin (`--mutate`); 0 when items never change.
  public var mutationRate: Double
  /// Shown images whose item code could not be read (counted as wrong).
  public var undecodable: Int
  /// Loads issued.
  public var loads: Int
  /// Images shown.
  public var images: Int
  /// Failed loads by error code.
  public var errors: [String: Int]
  /// Whether the origin could count its requests (false for an external origin: then the
  /// origin figures are 0).
  public var originCounted: Bool
  /// Origin requests during the run.
  public var originFetches: Int
  /// Distinct source URLs the run asked for.
  public var uniqueSources: Int
  /// `origin_fetches / unique_sources`.
  public var dedupRatio: Double
  /// Stale results dropped.
  public var staleDropped: StaleDropped
  /// Work for items cancelled before display.
  public var cancelledWork: CancelledWork
  /// Latency of shown images and errors, load to result.
  public var latencyMs: Percentiles
  /// The same per outcome: memory, disk, miss, coalesced, error, cancelled (load to supersede).
  public var latencyByOutcomeMs: [String: Percentiles]
  /// From an item entering the viewport to its image shown.
  public var timeToVisibleMs: Percentiles
  /// From a load to the first thing its cell could paint (its placeholder, or its image).
  public var timeToFirstPixelMs: Percentiles
  /// Loads whose first paint was a placeholder.
  public var placeholders: Int
  /// Loads whose first paint was their preview.
  public var previewFirst: Int
  /// From a load to its preview, for the loads that got one.
  public var timeToPreviewMs: Percentiles
  /// First pixel, preview and image per outcome of the image (memory, disk, miss...).
  public var paintByOutcomeMs: [String: Paint]
  /// How far into its source's download each preview was shown: 0 at the body's first byte
  /// leaving the origin, 1 at its last (a ratio, not ms; empty when the origin is not timed).
  public var previewDownloadShare: Percentiles
  /// Previews shown before half of their source's body had been sent.
  public var previewsBeforeHalfDownload: Int
  /// `[upper bound ms (-1: above 10 s), count]` for `first_pixel`, `preview` and `image`: the
  /// HTML report plots the three together.
  public var paintHistograms: [String: [[Double]]]
  /// Images shown per second of scrolling.
  public var throughputRps: Double
  /// Prefetched items reported cached.
  public var prefetched: Int
  /// Prefetched items that failed.
  public var prefetchErrors: Int
  /// Stampede figures, when that scenario ran.
  public var stampede: Stampede?
  /// What the flooding client asked and got, when `--prefetch-flood` was on.
  public var flood: Flood?
  /// `[seconds, MiB]` samples of the server's resident memory.
  public var rssMb: [[Double]]
  /// `[seconds, ms]` for every shown image.
  public var timeToVisibleSeries: [[Double]]
  /// `[upper bound ms (-1: above 10 s), count]`, shown images and errors.
  public var latencyHistogram: [[Double]]
  /// The same per outcome (the keys of `latencyByOutcomeMs`), so a mass of memory hits does
  /// not hide the shape of the misses.
  public var latencyHistogramByOutcome: [String: [[Double]]]

  static func make(
    options: RunOptions, target: String, measurements: Measurements, elapsed: Double,
    scrolledSeconds: Double, originBefore: [String: Int], origin: any ImageOrigin,
    before: ServerFigures, after: ServerFigures, stampede: Stampede?
  ) -> Report {
    let state = measurements.state.withLock { $0 }
    let requests = origin.requests ?? [:]
    let bytes = origin.bytesSent ?? [:]
    var fetches = 0
    for (path, count) in requests {
      // The prefetch flood's filler is load, not part of what the lists asked for.
      if let item = Self.item(ofPath: path), item >= SyntheticOrigin.fillerItems { continue }
      fetches += count - (originBefore[path] ?? 0)
    }
    // Item paths the origin served that no list ever showed: wasted downloads.
    var wastedFetches = 0
    var wastedBytes = 0
    for (path, count) in requests where count > (originBefore[path] ?? 0) {
      guard let item = Self.item(ofPath: path), !state.displayed.contains(item),
        item < SyntheticOrigin.fillerItems
      else { continue }
      if let stampede, stampede.uniqueSources > 0, item >= Runner.stampedeItems { continue }
      wastedFetches += count - (originBefore[path] ?? 0)
      wastedBytes += bytes[path] ?? 0
    }
    var unique = state.requested.count
    if let stampede { unique += stampede.uniqueSources }
    let all = state.latencies.filter { $0.key != "cancelled" }.values.flatMap { $0 }
    let shares = Self.downloadShares(state.previewArrivals, origin.transfers ?? [:])
    return Report(
      scenario: options.scenarios.map(\.rawValue).joined(separator: "+"), target: target,
      seed: options.seed,
      durationS: elapsed, lists: options.lists, itemsPerList: options.items, slots: options.slots,
      prefetchWindow: options.prefetchWindow, prefetchFlood: options.prefetchFlood,
      cache: options.cache, preview: options.preview, wrongDeliveries: state.wrongDeliveries,
      wrongExamples: state.wrongExamples, staleDeliveries: state.staleDeliveries,
      staleExamples: state.staleExamples, mutationRate: origin.mutations?.rate ?? 0,
      undecodable: state.undecodable, loads: state.loads,
      images: state.images, errors: state.errors, originCounted: origin.requests != nil,
      originFetches: fetches, uniqueSources: unique,
      dedupRatio: unique > 0 ? Double(fetches) / Double(unique) : 0,
      staleDropped: StaleDropped(
        server: after.staleDrops - before.staleDrops, client: state.clientStale),
      cancelledWork: CancelledWork(
        loadsSuperseded: state.superseded, workStopped: after.cancelledWork - before.cancelledWork,
        wastedFetches: wastedFetches, wastedBytes: wastedBytes,
        decodes: after.decodes - before.decodes),
      latencyMs: Percentiles(all),
      latencyByOutcomeMs: state.latencies.mapValues(Percentiles.init),
      timeToVisibleMs: Percentiles(state.timeToVisible.map(\.ms)),
      timeToFirstPixelMs: Percentiles(state.timeToFirstPixel), placeholders: state.placeholders,
      previewFirst: state.previewFirst, timeToPreviewMs: Percentiles(state.timeToPreview),
      paintByOutcomeMs: state.paints.mapValues {
        Paint(
          firstPixel: Percentiles($0.firstPixel), preview: Percentiles($0.preview),
          image: Percentiles($0.image))
      },
      previewDownloadShare: Percentiles(shares),
      previewsBeforeHalfDownload: shares.count { $0 < 0.5 },
      paintHistograms: [
        "first_pixel": Self.histogram(state.timeToFirstPixel),
        "preview": Self.histogram(state.timeToPreview),
        "image": Self.histogram(state.paints.values.flatMap(\.image)),
      ],
      throughputRps: scrolledSeconds > 0 ? Double(state.images) / scrolledSeconds : 0,
      prefetched: state.prefetched, prefetchErrors: state.prefetchErrors, stampede: stampede,
      flood: options.prefetchFlood > 0
        ? Flood(
          announced: state.floodAnnounced, prefetched: state.floodPrefetched,
          failed: state.floodFailed) : nil,
      rssMb: state.rss.map { [($0.at * 10).rounded() / 10, ($0.megabytes * 10).rounded() / 10] },
      timeToVisibleSeries: state.timeToVisible.map {
        [($0.at * 1000).rounded() / 1000, ($0.ms * 100).rounded() / 100]
      },
      latencyHistogram: Self.histogram(all),
      latencyHistogramByOutcome: state.latencies.mapValues(Self.histogram))
  }

  /// Upper bounds of the histogram's buckets, ms: 1-2-5 steps from 0.1 ms (a memory hit) to
  /// 10 s, then everything above.
  static let histogramBounds: [Double] =
    [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, .infinity]

  /// Log-spaced buckets: [upper bound ms, count].
  static func histogram(_ values: [Double]) -> [[Double]] {
    let bounds = histogramBounds
    var counts = [Double](repeating: 0, count: bounds.count)
    for value in values {
      let index = bounds.firstIndex { value <= $0 } ?? bounds.count - 1
      counts[index] += 1
    }
    return zip(bounds, counts).map { [$0.0.isFinite ? $0.0 : -1, $0.1] }
  }

  /// For each preview, how far the origin was through sending its source's body when the
  /// preview was shown: the last transfer of that path begun before it.
  static func downloadShares(
    _ arrivals: [(path: String, at: ContinuousClock.Instant)],
    _ transfers: [String: [OriginTransfer]]
  ) -> [Double] {
    arrivals.compactMap { arrival in
      guard let transfer = transfers[arrival.path]?.last(where: { $0.start <= arrival.at })
      else { return nil }
      let length = transfer.start.duration(to: transfer.end).seconds
      let into = transfer.start.duration(to: arrival.at).seconds
      return length > 0 ? into / length : (into > 0 ? 1 : 0)
    }
  }

  static func item(ofPath path: String) -> Int? {
    guard path.hasPrefix("/item/"), let dot = path.lastIndex(of: ".") else { return nil }
    return Int(path[path.index(path.startIndex, offsetBy: 6)..<dot])
  }

  /// The report as JSON, keys in snake case, sorted.
  public func json() throws -> Data {
    let encoder = JSONEncoder()
    encoder.keyEncodingStrategy = .convertToSnakeCase
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    return try encoder.encode(self)
  }

  /// The summary table printed at the end of a run.
  public func summary() -> String {
    func ms(_ value: Double) -> String { String(format: "%.1f", value) }
    var lines = [
      "thumbload: \(scenario) against \(target), \(String(format: "%.1f", durationS)) s, seed \(seed)",
      "",
      "outcome        count      p50 ms    p95 ms    p99 ms    max ms",
    ]
    for (outcome, p) in latencyByOutcomeMs.sorted(by: { $0.key < $1.key }) {
      lines.append(
        outcome.padding(toLength: 12, withPad: " ", startingAt: 0)
          + String(format: "%8d  %9.1f %9.1f %9.1f %9.1f", p.count, p.p50, p.p95, p.p99, p.max))
    }
    lines += [
      "",
      "time to visible  p50 \(ms(timeToVisibleMs.p50)) ms  p95 \(ms(timeToVisibleMs.p95)) ms  "
        + "p99 \(ms(timeToVisibleMs.p99)) ms",
      "first pixel      p50 \(ms(timeToFirstPixelMs.p50)) ms  p95 \(ms(timeToFirstPixelMs.p95)) ms  "
        + "p99 \(ms(timeToFirstPixelMs.p99)) ms (\(placeholders) loads painted a placeholder first, "
        + "\(previewFirst) a preview)",
      "throughput       \(String(format: "%.1f", throughputRps)) images/s (\(images) shown, \(loads) loads)",
    ]
    if preview {
      lines.append(
        "previews         \(timeToPreviewMs.count) shown, p50 \(ms(timeToPreviewMs.p50)) ms  "
          + "p95 \(ms(timeToPreviewMs.p95)) ms after their load"
          + (previewDownloadShare.count > 0
            ? "; \(previewsBeforeHalfDownload) of \(previewDownloadShare.count) before half "
              + "their download (median at \(Int(previewDownloadShare.p50 * 100))%)" : ""))
    }
    lines += [
      originCounted
        ? "origin fetches   \(originFetches) for \(uniqueSources) unique sources "
          + "(ratio \(String(format: "%.2f", dedupRatio)))"
        : "origin fetches   not counted (external origin), \(uniqueSources) unique sources",
      "cancelled work   \(cancelledWork.loadsSuperseded) loads superseded, "
        + "\(cancelledWork.workStopped) jobs stopped, \(cancelledWork.wastedFetches) fetches "
        + "(\(cancelledWork.wastedBytes / 1024) KiB) never shown",
      "stale dropped    server \(staleDropped.server), client \(staleDropped.client)",
      "prefetch         \(prefetched) cached, \(prefetchErrors) failed",
      "errors           "
        + (errors.isEmpty
          ? "none" : errors.map { "\($0.key) \($0.value)" }.sorted().joined(separator: ", ")),
    ]
    if let flood {
      lines.append(
        "flood            \(flood.announced) items announced, \(flood.prefetched) prefetched, "
          + "\(flood.failed) failed")
    }
    if let stampede {
      lines.append(
        "stampede         \(stampede.clients) clients x \(stampede.uniqueSources) items: "
          + "\(stampede.originFetches) origin fetches, \(stampede.delivered) delivered")
    }
    if let peak = rssMb.map({ $0[1] }).max() {
      lines.append("server RSS       peak \(String(format: "%.1f", peak)) MiB")
    }
    lines.append("WRONG DELIVERIES \(wrongDeliveries)" + (wrongDeliveries > 0 ? "  <-- FAIL" : ""))
    for example in wrongExamples.prefix(3) { lines.append("  " + example) }
    if mutationRate > 0 {
      lines.append(
        "STALE DELIVERIES \(staleDeliveries)" + (staleDeliveries > 0 ? "  <-- FAIL" : "")
          + "  (\(mutationRate) changes/s)")
      for example in staleExamples.prefix(3) { lines.append("  " + example) }
    }
    return lines.joined(separator: "\n")
  }
}
