import ImagePipeline
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// `GET /metrics`: the pipeline's counters, stage histograms, workload and process figures in
/// Prometheus text exposition format 0.0.4, every name prefixed `thumbd_`.
struct PrometheusExposition {
  private var lines: [String] = []

  static func render(
    metrics: PipelineMetrics.Snapshot, workload: ThumbnailPipeline.Workload,
    requestsByStatus: [Int: Int], responsesByFormat: [String: Int] = [:],
    fetcher: FetcherFigures? = nil,
    disk: DiskCache.Statistics? = nil, memory: MemoryBudgetSnapshot? = nil,
    memoryCache: MemoryCache<ImageRequest, Thumbnail>.Statistics? = nil, logFailures: Int = 0,
    invalidSignatures: Int = 0, clientLimited: Int = 0, delegated: [String: [String: Int]] = [:],
    videoFrames: [String: Int] = [:], videoFrameServers: Int? = nil
  ) -> String {
    var out = PrometheusExposition()
    out.family("thumbd_requests_total", "counter", "HTTP responses by status.")
    for (status, count) in requestsByStatus.sorted(by: { $0.key < $1.key }) {
      out.sample("thumbd_requests_total{status=\"\(status)\"}", count)
    }
    out.family(
      "thumbd_responses_total", "counter", "Thumbnails sent (200 over HTTP), by image format.")
    for (format, count) in responsesByFormat.sorted(by: { $0.key < $1.key }) {
      out.sample("thumbd_responses_total{format=\"\(format)\"}", count)
    }
    out.family("thumbd_cache_hits_total", "counter", "Requests answered from a cache, by tier.")
    out.sample("thumbd_cache_hits_total{tier=\"memory\"}", metrics.memoryHits)
    out.sample("thumbd_cache_hits_total{tier=\"disk\"}", metrics.diskHits)
    out.counter("thumbd_cache_misses_total", "Requests that started new work.", metrics.misses)
    out.counter(
      "thumbd_coalesced_joins_total", "Subscriptions that joined work in flight.",
      metrics.coalescedJoins)
    out.counter("thumbd_origin_fetches_total", "Source downloads.", metrics.originFetches)
    out.counter("thumbd_origin_bytes_total", "Bytes downloaded from sources.", metrics.originBytes)
    if let fetcher {
      out.counter(
        "thumbd_origin_retries_total", "Origin attempts made again after a retryable failure.",
        fetcher.retries)
      out.counter("thumbd_origin_redirects_total", "Redirect hops followed.", fetcher.redirects)
      out.counter(
        "thumbd_origin_refused_connections_total",
        "Origin exchanges refused at connect time: every address failed the address rules.",
        fetcher.refusedConnections)
      out.counter(
        "thumbd_origin_connections_total", "Origin connections opened (kept alive and reused).",
        fetcher.connections)
    }
    if let memoryCache {
      out.gauge("thumbd_memory_cache_entries", "Thumbnails in the memory cache.", memoryCache.count)
      out.gauge(
        "thumbd_memory_cache_bytes", "Bytes of thumbnails in the memory cache.",
        memoryCache.totalCost)
    }
    if let disk {
      out.gauge("thumbd_disk_cache_entries", "Entries in the disk cache.", disk.count)
      out.gauge("thumbd_disk_cache_bytes", "Bytes of disk cache entries.", disk.totalBytes)
      out.counter(
        "thumbd_disk_cache_evictions_total", "Entries evicted (size limit or a full disk).",
        disk.evictions)
      out.family(
        "thumbd_disk_cache_faults_total", "counter",
        "Storage faults by kind: no_space, refused, write_failed, corrupt.")
      for fault in DiskCache.Fault.allCases {
        out.sample(
          "thumbd_disk_cache_faults_total{kind=\"\(fault.rawValue)\"}",
          disk.faults[fault.rawValue] ?? 0)
      }
    }
    if let memory {
      out.gauge("thumbd_memory_budget_bytes", "The memory budget (memory_budget).", memory.limit)
      out.family(
        "thumbd_memory_budget_used_bytes", "gauge",
        "Bytes of the budget in use, by part: work (sources in flight, decode estimates), cache, process (the daemon's own memory beyond memory_process_allowance)."
      )
      out.sample("thumbd_memory_budget_used_bytes{part=\"work\"}", memory.work)
      out.sample("thumbd_memory_budget_used_bytes{part=\"cache\"}", memory.cache)
      out.sample("thumbd_memory_budget_used_bytes{part=\"process\"}", memory.process)
      out.gauge(
        "thumbd_memory_budget_peak_work_bytes", "The most work has held at once.", memory.peakWork)
      out.gauge("thumbd_memory_budget_waiting", "Jobs waiting for memory now.", memory.waiting)
      out.counter(
        "thumbd_memory_budget_waits_total", "Jobs that waited for memory.", memory.waits)
      out.counter(
        "thumbd_memory_budget_refusals_total",
        "Jobs refused (413 too_large) because they alone need more than the budget.",
        memory.refusals)
    }
    out.counter(
      "thumbd_log_write_failures_total", "Log lines that could not be written.", logFailures)
    out.counter("thumbd_decodes_total", "Decodes started.", metrics.decodes)
    out.counter(
      "thumbd_cancelled_work_total", "Jobs stopped because every subscriber left.",
      metrics.cancelledWork)
    out.counter(
      "thumbd_desktop_jobs_total",
      "Desktop thumbnail jobs (D-Bus Thumbnailer1) started on a decode thread.",
      metrics.desktopJobs)
    out.counter(
      "thumbd_invalid_signatures_total",
      "Signed paths refused (403 invalid_signature) before any work.", invalidSignatures)
    out.counter(
      "thumbd_client_limited_total",
      "Misses refused (429) because their client's bucket was empty.", clientLimited)
    out.counter(
      "thumbd_stale_drops_total", "Results dropped because the slot had moved on.",
      metrics.staleDrops)
    out.counter(
      "thumbd_disk_writes_skipped_total",
      "Thumbnails not written to the disk cache because too many writes were pending.",
      metrics.diskWritesSkipped)
    out.family(
      "thumbd_revalidations_total", "counter",
      "Stale sources asked again, by result (unchanged, changed, error).")
    for result in ["unchanged", "changed", "error"] {
      out.sample(
        "thumbd_revalidations_total{result=\"\(result)\"}", metrics.revalidations[result] ?? 0)
    }
    out.counter(
      "thumbd_stale_served_total",
      "Stale thumbnails served (stale_if_error, stale_while_revalidate).", metrics.staleServed)
    out.counter(
      "thumbd_previews_total",
      "Previews made for loads that asked (EXIF or HEIF thumbnail, progressive JPEG DC scans).",
      metrics.previews)
    out.counter(
      "thumbd_source_changes_total",
      "Sources found changed (a file's stamp, an origin's new content); their entries dropped.",
      metrics.sourceChanges)
    out.counter("thumbd_purges_total", "Purges asked for (DELETE /v1/source).", metrics.purges)
    out.family(
      "thumbd_colour_profiles_total", "counter",
      "Decodes by what became of the source's colour profile: converted, kept, standard_cmyk,"
        + " and the warnings broken, oversized, unlinkable (ignored, the image taken as sRGB).")
    for outcome in ProfileOutcome.allCases where outcome != .none {
      out.sample(
        "thumbd_colour_profiles_total{outcome=\"\(outcome.rawValue)\"}",
        metrics.profiles[outcome.rawValue] ?? 0)
    }
    let colour = ColourManagement.stats()
    out.gauge("thumbd_colour_transforms", "Colour transforms cached now.", colour.entries)
    out.gauge(
      "thumbd_colour_transform_bytes",
      "Bytes lcms2 and the tables hold for the cached colour transforms.", colour.bytes)
    out.counter(
      "thumbd_colour_transform_builds_total",
      "Colour transforms built (a profile parsed and linked); the rest came from the cache.",
      colour.builds)
    out.family("thumbd_errors_total", "counter", "Failed requests by error kind.")
    for (kind, count) in metrics.errors.sorted(by: { $0.key < $1.key }) {
      out.sample("thumbd_errors_total{kind=\"\(kind)\"}", count)
    }
    out.family("thumbd_inflight", "gauge", "Work in flight per stage.")
    out.sample("thumbd_inflight{stage=\"thumbnail\"}", workload.thumbnailsInFlight)
    out.sample("thumbd_inflight{stage=\"fetch\"}", workload.fetchesInFlight)
    out.sample("thumbd_inflight{stage=\"decode\"}", workload.runningDecodes)
    out.sample("thumbd_inflight{stage=\"prefetch\"}", workload.prefetchInProgress)
    out.gauge(
      "thumbd_fetch_slots_in_use", "Download slots held (lookups included).",
      workload.fetchSlotsInUse)
    out.family("thumbd_queued", "gauge", "Work waiting per stage.")
    out.sample("thumbd_queued{stage=\"fetch\"}", workload.queuedFetches)
    out.sample("thumbd_queued{stage=\"decode\"}", workload.queuedDecodes)
    out.sample("thumbd_queued{stage=\"prefetch\"}", workload.queuedPrefetch)
    out.family("thumbd_stage_seconds", "histogram", "Latency per stage.")
    for stage in PipelineMetrics.stages {
      guard let histogram = metrics.latencies[stage] else { continue }
      var cumulative = 0
      for (i, bound) in LatencyHistogram.bounds.enumerated() {
        cumulative += histogram.counts[i]
        out.sample("thumbd_stage_seconds_bucket{stage=\"\(stage)\",le=\"\(bound)\"}", cumulative)
      }
      out.sample("thumbd_stage_seconds_bucket{stage=\"\(stage)\",le=\"+Inf\"}", histogram.count)
      out.lines.append("thumbd_stage_seconds_sum{stage=\"\(stage)\"} \(histogram.sum)")
      out.sample("thumbd_stage_seconds_count{stage=\"\(stage)\"}", histogram.count)
    }
    out.family(
      "thumbd_thumbnailer_runs_total", "counter",
      "Installed thumbnailer runs in the sandbox, by entry file and outcome.")
    for (entry, outcomes) in delegated.sorted(by: { $0.key < $1.key }) {
      for (outcome, count) in outcomes.sorted(by: { $0.key < $1.key }) {
        out.sample(
          "thumbd_thumbnailer_runs_total{entry=\"\(Self.label(entry))\",outcome=\"\(outcome)\"}",
          count)
      }
    }
    out.family(
      "thumbd_video_frames_total", "counter",
      "Runs of the frame worker (thumbd-frame: videos, PDFs, SVGs) in the sandbox, by outcome.")
    for (outcome, count) in videoFrames.sorted(by: { $0.key < $1.key }) {
      out.sample("thumbd_video_frames_total{outcome=\"\(outcome)\"}", count)
    }
    if let videoFrameServers {
      out.family(
        "thumbd_video_frame_servers_started_total", "counter",
        "Frame workers started in the sandbox; each serves many videos, PDFs and SVGs.")
      out.sample("thumbd_video_frame_servers_started_total", videoFrameServers)
    }
    out.gauge(
      "thumbd_process_resident_memory_bytes", "Resident set size.", ProcessFigures.residentBytes())
    out.gauge("thumbd_process_open_fds", "Open file descriptors.", ProcessFigures.openDescriptors())
    return out.lines.joined(separator: "\n") + "\n"
  }

  /// A label value from a name thumbd does not choose (an entry's file name): letters, digits,
  /// `.`, `-` and `_` kept, anything else `_`.
  static func label(_ text: String) -> String {
    String(
      String.UnicodeScalarView(
        text.unicodeScalars.prefix(128).map {
          $0.isASCII
            && ($0.properties.isAlphabetic || ("0"..."9").contains($0)
              || ".-_".unicodeScalars.contains($0))
            ? $0 : "_"
        }))
  }

  private mutating func family(_ name: String, _ type: String, _ help: String) {
    lines.append("# HELP \(name) \(help)")
    lines.append("# TYPE \(name) \(type)")
  }

  private mutating func gauge(_ name: String, _ help: String, _ value: Int) {
    family(name, "gauge", help)
    sample(name, value)
  }

  private mutating func counter(_ name: String, _ help: String, _ value: Int) {
    family(name, "counter", help)
    sample(name, value)
  }

  private mutating func sample(_ name: String, _ value: Int) {
    lines.append("\(name) \(value)")
  }
}

/// The origin fetcher's counters at one moment.
struct FetcherFigures {
  let retries: Int
  let redirects: Int
  let refusedConnections: Int
  let connections: Int

  init(_ loader: SourceLoader) {
    retries = loader.counters.retries.load(ordering: .relaxed)
    redirects = loader.counters.redirects.load(ordering: .relaxed)
    refusedConnections = loader.counters.refusedConnections.load(ordering: .relaxed)
    connections = loader.connectionsOpened
  }
}

/// Figures about this process from /proc.
enum ProcessFigures {
  /// Resident set size in bytes (from /proc/self/statm).
  static func residentBytes() -> Int {
    guard let bytes = SystemFiles.read("/proc/self/statm", limit: 4096) else { return 0 }
    let text = String(decoding: bytes, as: UTF8.self)
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
  }

  /// Open file descriptors (entries of /proc/self/fd, less the one used to list them).
  static func openDescriptors() -> Int {
    let count = SystemFiles.list("/proc/self/fd")?.count ?? 1
    return max(0, count - 1)
  }
}
