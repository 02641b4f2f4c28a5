import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The loader: memory cache in front of two coalescing stages, one download per URL and one
/// decode per URL + spec, with bounded, priority-ordered concurrency in each.
public final class ThumbnailPipeline: Sendable {
  /// Online processor cores.
  public static var coreCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

  /// Encoded thumbnails by request.
  public let memoryCache: MemoryCache<ImageRequest, Thumbnail>
  /// Placeholders per source and revision (`Placeholder`), counted in the memory budget.
  public let placeholders = PlaceholderIndex()
  /// What the pipeline has done so far.
  public let metrics: PipelineMetrics
  /// The disk cache of thumbnails, if there is one.
  public var diskCache: DiskCache? { configuration.diskCache }
  /// Whether thumbnails made here carry placeholders (`Thumbnailer.makesPlaceholders`).
  public var makesPlaceholders: Bool { configuration.thumbnailer.makesPlaceholders }
  /// Whether placeholders are kept on disk too.
  public var hasPlaceholderCache: Bool { configuration.placeholderCache != nil }
  let configuration: Configuration
  let sources: SourceCatalog
  let fetches: CoalescingStage<FetchKey, FetchedSource>
  let thumbnails: CoalescingStage<ImageRequest, Produced>
  /// The first bytes of downloads a preview can be made from, for the thumbnail jobs that
  /// want one (`PreviewWatcher`).
  let fetchPreviews = Announcements<FetchKey, [UInt8]>()
  /// Previews of thumbnail jobs, for the consumers that asked.
  let thumbnailPreviews = Announcements<ImageRequest, Thumbnail>()
  /// Consumers waiting with a preview listener. While there are any, downloads are watched and
  /// thumbnail jobs listen for their first bytes (a consumer that asks for a preview may join
  /// a job a prefetch began); with none, previews cost nothing.
  let previewConsumers = Atomic<Int>(0)
  let failures: NegativeCache<ImageRequest>
  let fetchLimiter: PriorityLimiter
  let prefetchAdmission: PrefetchAdmission
  let visibleActivity = VisibleActivity()
  let decoders: DecodeWorkers
  let diskWrites: WriteBehind
  let budget: MemoryBudget
  /// Disk removals of changed sources still running, by URL (see `sourceChanged`).
  let diskRemovals = Mutex<[String: (id: UInt64, task: Task<Void, Never>)]>([:])
  let allocatorTrim: AllocatorTrim
  private let ids = Atomic<UInt64>(0)

  /// Creates a pipeline and starts its decode threads.
  public init(configuration: Configuration) {
    let metrics = PipelineMetrics()
    self.configuration = configuration
    self.metrics = metrics
    sources = SourceCatalog(capacity: max(1024, 2 * configuration.memoryCacheCountLimit))
    memoryCache = MemoryCache(
      costLimit: configuration.memoryCacheCostLimit,
      countLimit: configuration.memoryCacheCountLimit,
      grouping: configuration.maxVariantsPerSource > 0
        ? MemoryCache.Grouping(limit: configuration.maxVariantsPerSource) { $0.url } : nil)
    fetches = CoalescingStage(
      onJoin: { metrics.countJoin() }, onWorkCancelled: { metrics.countCancelledWork() })
    thumbnails = CoalescingStage(
      onJoin: { metrics.countJoin() }, onWorkCancelled: { metrics.countCancelledWork() })
    fetchLimiter = PriorityLimiter(
      limit: configuration.maxConcurrentFetches, originLimit: configuration.maxFetchesPerOrigin)
    prefetchAdmission = PrefetchAdmission(
      limit: configuration.maxPrefetchInProgress, visibleActivity: visibleActivity)
    diskWrites = WriteBehind(limit: 256)
    decoders = DecodeWorkers(
      threads: configuration.decodeThreads, maxQueued: configuration.maxQueuedDecodes)
    failures = NegativeCache(seconds: configuration.negativeCacheSeconds)
    let cache = memoryCache
    let index = placeholders
    let trim = AllocatorTrim(delay: configuration.trimWhenIdle)
    allocatorTrim = trim
    let idle = Mutex<MemoryBudget?>(nil)
    budget = MemoryBudget(
      limit: configuration.memoryBudget,
      cacheBytes: { cache.statistics.totalCost + index.totalCost },
      trimCache: { cache.trim(toCost: $0) },
      onActivity: { isIdle in
        if isIdle {
          trim.workEnded(stillIdle: { idle.withLock { $0?.isIdle ?? true } })
        } else {
          trim.workStarted()
        }
      })
    idle.withLock { $0 = budget }
  }

  /// The memory budget's figures now: work held, the cache, waits and refusals.
  public var memoryBudget: MemoryBudgetSnapshot { budget.snapshot }

  /// Keeps a thumbnail in the memory cache, which then gives way to work if the budget
  /// needs it: the one place thumbnails enter memory.
  func cache(_ thumbnail: Thumbnail, for request: ImageRequest) {
    memoryCache.setValue(thumbnail, forKey: request, cost: thumbnail.data.count)
    budget.trimCacheIfNeeded()
  }

  /// What the thumbnail stage produces: the thumbnail and where it came from (`.miss` for a
  /// new render).
  struct Produced: Sendable {
    let thumbnail: Thumbnail
    let source: ResponseSource
  }

  deinit { decoders.shutdown() }

  /// Starts loading `request` for `client` and returns a handle to await, reprioritise or
  /// cancel it. With `onPreview`, a miss also hands on a preview (`Thumbnailer.preview`) when
  /// the source carries an early picture: at most once, never after the response, from the
  /// first bytes of a download when they are enough (a JPEG's EXIF thumbnail or first DC
  /// scans) or else before the decode (a HEIF's thumbnail). `onPreview` must not block.
  /// `onFinish` hears the outcome (after any preview) from the task's own context, so an owner
  /// with a serial context of its own needs no second task to wait for it.
  public func task(
    for request: ImageRequest, priority: ImagePriority = .normal, client: ClientID = .shared,
    onPreview: (@Sendable (Thumbnail) -> Void)? = nil,
    onFinish: (@Sendable (Result<ImageResponse, any Error>) -> Void)? = nil
  ) -> ImageTask {
    ImageTask(
      request: request, memoryChecked: false, priority: priority, client: client,
      pipeline: self, id: nextID(), onPreview: onPreview, onFinish: onFinish)
  }

  /// `task(for:)` for a request `lookup` has just missed: the memory cache is not asked again
  /// before the job (whose own look, after any job it joins has ended, stays).
  public func task(
    after miss: MemoryMiss, priority: ImagePriority = .normal, client: ClientID = .shared,
    onPreview: (@Sendable (Thumbnail) -> Void)? = nil,
    onFinish: (@Sendable (Result<ImageResponse, any Error>) -> Void)? = nil
  ) -> ImageTask {
    ImageTask(
      request: miss.request, memoryChecked: true, priority: priority, client: client,
      pipeline: self, id: nextID(), onPreview: onPreview, onFinish: onFinish)
  }

  /// Loads `request` for `client`; the subscription lasts as long as the calling task.
  public func response(
    for request: ImageRequest, priority: ImagePriority = .normal, client: ClientID = .shared
  ) async throws -> ImageResponse {
    try await load(request, id: nextID(), priority: PriorityBox(priority), client: client)
  }

  /// `response(for:)` for a request `lookup` has just missed, without asking the memory cache
  /// again before the job.
  public func response(
    after miss: MemoryMiss, priority: ImagePriority = .normal, client: ClientID = .shared
  ) async throws -> ImageResponse {
    try await load(
      miss.request, id: nextID(), priority: PriorityBox(priority), client: client,
      memoryChecked: true)
  }

  /// Waits until every thumbnail delivered so far is on disk (writes happen after delivery),
  /// or until the calling task is cancelled. A server calls it before exiting.
  public func flushDiskWrites() async {
    await diskWrites.flush()
  }

  /// The memory cache's answer to `request`, without suspending: servers answer hits on their
  /// I/O thread and start a task only for a miss, which `response(after:)` or `task(after:)`
  /// loads without asking the cache again. A hit is counted like any request; a visible
  /// request also counts as visible activity (see `PrefetchAdmission`). `received` is when the
  /// request had arrived: a check of its source made since (a file's `stat` for another
  /// request read in the same pass) may serve it.
  public func lookup(
    _ request: ImageRequest, priority: ImagePriority = .visible, client: ClientID = .shared,
    received: ContinuousClock.Instant = .now
  ) -> MemoryLookup {
    let started = ContinuousClock.now
    if priority == .visible { visibleActivity.note(client) }
    guard
      let response = memoryHit(request, priority: priority, client: client, received: received)
    else {
      return .miss(MemoryMiss(request: request))
    }
    metrics.countRequest()
    if response.source == .memory { metrics.countMemoryHit() }
    metrics.observe("total", started.duration(to: .now).seconds)
    return .hit(response)
  }

  /// Thumbnails that have left the memory cache so far (`MemoryCache.removals`): when it is
  /// the same as before a memory hit was found, that thumbnail is in the cache still.
  public var memoryRemovals: UInt64 { memoryCache.removals }

  /// Counts a memory hit that shares an earlier hit's check instead of making its own: the
  /// same thumbnail, nothing removed from the cache since, its source checked after this
  /// request arrived (a server answering a burst of requests for one thumbnail). Notes the
  /// client's activity and counts it as `lookup` does a hit, as taking no time.
  public func countSharedMemoryHit(priority: ImagePriority, client: ClientID) {
    if priority == .visible { visibleActivity.note(client) }
    metrics.countRequest()
    metrics.countMemoryHit()
    metrics.observe("total", 0)
  }

  func nextID() -> UInt64 { ids.add(1, ordering: .relaxed).newValue }

  /// Whether some consumer now waits with a preview listener.
  var previewsWanted: Bool { previewConsumers.load(ordering: .relaxed) > 0 }

  /// Loads `request`: from memory at once unless a `lookup` has just missed
  /// (`memoryChecked`), else through its thumbnail job, which looks once more (a job it
  /// joins may have ended in between).
  func load(
    _ request: ImageRequest, id: UInt64, priority: PriorityBox, client: ClientID = .shared,
    memoryChecked: Bool = false, onPreview: Announcements<ImageRequest, Thumbnail>.Listener? = nil
  ) async throws -> ImageResponse {
    let started = ContinuousClock.now
    metrics.countRequest()
    defer { metrics.observe("total", started.duration(to: .now).seconds) }
    if priority.value == .visible { visibleActivity.note(client) }
    let spec = request.spec
    if !memoryChecked,
      let response = memoryHit(request, priority: priority.value, client: client)
    {
      if response.source == .memory { metrics.countMemoryHit() }
      return response
    }
    if let remembered = failures.failure(for: request) {
      metrics.countError(remembered.kind)
      throw remembered
    }
    if let onPreview {
      previewConsumers.add(1, ordering: .relaxed)
      thumbnailPreviews.listen(request, id: id, onPreview)
    }
    defer {
      if onPreview != nil {
        thumbnailPreviews.stopListening(request, id: id)
        previewConsumers.subtract(1, ordering: .relaxed)
      }
    }
    do {
      func deliver() async throws -> CoalescingStage<ImageRequest, Produced>.Delivery {
        try await thumbnails.value(
          for: request, subscriber: id, priority: priority, client: client
        ) { request, context in
          try await self.produce(request, spec, context)
        }
      }
      var delivery = try await deliver()
      // A job or download this request joined may have read the file before the request
      // came and a change after it: a file's thumbnail is checked against the file as it is
      // now, and made again if it changed. A job started after the first one ended started
      // after this request, so one more try nearly always settles it; the bound is for a
      // file rewritten faster than it decodes.
      for _ in 0..<2 {
        guard case .file = delivery.value.thumbnail.source.validator,
          case .changed = verdict(
            for: request.url, stored: delivery.value.thumbnail.source, received: started)
        else { break }
        sourceChanged(request.url)
        delivery = try await deliver()
      }
      let produced = delivery.value
      if delivery.joined && produced.source != .stale {
        return ImageResponse(thumbnail: produced.thumbnail, source: .coalesced)
      }
      switch produced.source {
      case .disk: metrics.countDiskHit()
      case .miss: metrics.countMiss()
      case .memory: metrics.countMemoryHit()
      default: break
      }
      return ImageResponse(thumbnail: produced.thumbnail, source: produced.source)
    } catch let error as PipelineError {
      metrics.countError(error.kind)
      if error != .queueFull { failures.remember(error, for: request) }
      throw error
    }
  }

}
