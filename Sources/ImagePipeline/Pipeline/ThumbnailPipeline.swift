import Synchronization
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// The loader: memory cache in front of two coalescing stages, one download per URL and one
/// decode per URL + spec, with bounded, priority-ordered concurrency in each.
///
/// The façade that owns the stages: each is a value built once, here, from the few parts it
/// uses (`ThumbnailJob`, `FetchJob`, `PreviewMaker`, `PlaceholderKeeper`, and `SourceState`,
/// which judges and forgets sources for all of them), so what a stage depends on shows in its
/// stored properties. None extends this type.
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
  /// What is known of each source, and what forgets a changed one.
  let sourceState: SourceState
  let fetches: CoalescingStage<FetchKey, FetchedSource>
  let thumbnails: CoalescingStage<ImageRequest, ImageResponse>
  /// The thumbnail stage's job (which runs the fetch stage's).
  let job: ThumbnailJob
  /// The placeholders, kept and judged.
  let placeholderKeeper: PlaceholderKeeper
  /// Previews of thumbnail jobs, for the consumers that asked.
  let thumbnailPreviews = Announcements<ImageRequest, Thumbnail>()
  /// Consumers waiting with a preview listener (see `PreviewDemand`).
  let previewDemand = PreviewDemand()
  let failures: NegativeCache<ImageRequest>
  let fetchLimiter: PriorityLimiter
  let prefetchAdmission: PrefetchAdmission
  let visibleActivity = VisibleActivity()
  let decoders: DecodeWorkers
  let diskWrites: WriteBehind
  let budget: MemoryBudget
  let ids = SubscriberIDs()

  /// Creates a pipeline and starts its decode threads.
  public init(configuration: Configuration) {
    let metrics = PipelineMetrics()
    self.configuration = configuration
    self.metrics = metrics
    let memoryCache = MemoryCache<ImageRequest, Thumbnail>(
      costLimit: configuration.memoryCacheCostLimit,
      countLimit: configuration.memoryCacheCountLimit,
      grouping: configuration.maxVariantsPerSource > 0
        ? MemoryCache.Grouping(limit: configuration.maxVariantsPerSource) { $0.url } : nil)
    self.memoryCache = memoryCache
    let sourceState = SourceState(
      catalog: SourceCatalog(capacity: max(1024, 2 * configuration.memoryCacheCountLimit)),
      loader: configuration.dataLoader, memory: memoryCache, placeholders: placeholders,
      disk: configuration.diskCache, placeholderDisk: configuration.placeholderCache,
      sourceDisk: configuration.sourceCache, ids: ids, metrics: metrics)
    self.sourceState = sourceState
    fetches = CoalescingStage(
      onJoin: { metrics.countJoin() }, onWorkCancelled: { metrics.countCancelledWork() })
    thumbnails = CoalescingStage(
      onJoin: { metrics.countJoin() }, onWorkCancelled: { metrics.countCancelledWork() })
    let fetchLimiter = PriorityLimiter(
      limit: configuration.maxConcurrentFetches, originLimit: configuration.maxFetchesPerOrigin)
    self.fetchLimiter = fetchLimiter
    prefetchAdmission = PrefetchAdmission(
      limit: configuration.maxPrefetchInProgress, visibleActivity: visibleActivity)
    let diskWrites = WriteBehind(limit: 256)
    self.diskWrites = diskWrites
    let decoders = DecodeWorkers(
      threads: configuration.decodeThreads, maxQueued: configuration.maxQueuedDecodes)
    self.decoders = decoders
    failures = NegativeCache(seconds: configuration.negativeCacheSeconds)
    let cache = memoryCache
    let index = placeholders
    // Kept alive by the budget's activity callback, its one user.
    let trim = AllocatorTrim(delay: configuration.trimWhenIdle)
    let idle = Mutex<MemoryBudget?>(nil)
    let budget = MemoryBudget(
      limit: configuration.memoryBudget,
      cacheBytes: { cache.statistics.totalCost + index.totalCost },
      trimCache: { cache.trim(toCost: $0) }, process: configuration.processMemory,
      onActivity: { isIdle in
        if isIdle {
          trim.workEnded(
            stillIdle: { idle.withLock { $0?.isIdle ?? true } },
            trimmed: { idle.withLock { $0 }?.measureProcess(fresh: true) })
        } else {
          trim.workStarted()
        }
      })
    idle.withLock { $0 = budget }
    self.budget = budget
    let placeholderKeeper = PlaceholderKeeper(
      index: placeholders, disk: configuration.placeholderCache, sources: sourceState,
      diskWrites: diskWrites, metrics: metrics)
    self.placeholderKeeper = placeholderKeeper
    let fetch = FetchJob(
      sourceDisk: configuration.sourceCache, loader: configuration.dataLoader,
      sources: sourceState, budget: budget, limiter: fetchLimiter,
      reservation: configuration.downloadReservation,
      previews: Announcements<FetchKey, [UInt8]>(), previewDemand: previewDemand,
      metrics: metrics)
    job = ThumbnailJob(
      store: ThumbnailStore(
        memory: memoryCache, budget: budget, disk: configuration.diskCache,
        diskWrites: diskWrites, metrics: metrics),
      sources: sourceState, admission: prefetchAdmission, fetches: fetches, fetch: fetch,
      previews: PreviewMaker(
        thumbnailer: configuration.thumbnailer, decoders: decoders, budget: budget,
        published: thumbnailPreviews, metrics: metrics),
      previewDemand: previewDemand, thumbnailer: configuration.thumbnailer, decoders: decoders,
      budget: budget, placeholders: placeholderKeeper, ids: ids, metrics: metrics)
  }

  /// The memory budget's figures now: work held, the cache, waits and refusals.
  public var memoryBudget: MemoryBudgetSnapshot { budget.snapshot }

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

  func nextID() -> UInt64 { ids.next() }

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
    // A lookup that has just missed noted the client's activity already.
    if !memoryChecked && priority.value == .visible { visibleActivity.note(client) }
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
      previewDemand.add()
      thumbnailPreviews.listen(request, id: id, onPreview)
    }
    defer {
      if onPreview != nil {
        thumbnailPreviews.stopListening(request, id: id)
        previewDemand.remove()
      }
    }
    do {
      func deliver() async throws -> CoalescingStage<ImageRequest, ImageResponse>.Delivery {
        try await thumbnails.value(
          for: request, subscriber: id, priority: priority, client: client
        ) { request, context in
          try await self.job.produce(request, spec, context)
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
          case .changed = sourceState.verdict(
            for: request.url, stored: delivery.value.thumbnail.source, received: started)
        else { break }
        sourceState.sourceChanged(request.url)
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

  /// A memory hit that may be served now, without suspending, or nil. A changed source is
  /// dropped on the spot; a stale one inside its `stale-while-revalidate` window is served
  /// (`.stale`) while one revalidation starts.
  func memoryHit(
    _ request: ImageRequest, priority: ImagePriority, client: ClientID,
    received: ContinuousClock.Instant = .now
  ) -> ImageResponse? {
    guard var thumbnail = memoryCache.value(forKey: request) else { return nil }
    switch sourceState.verdict(for: request.url, stored: thumbnail.source, received: received) {
    case .fresh(let current):
      // Files come back as they were stored: no copy of the version on the hot path.
      if case .file = current.validator {} else { thumbnail.source = current }
      return ImageResponse(thumbnail: thumbnail, source: .memory)
    case .stale(let current):
      guard WallClock.now() < current.freshness.freshUntil + current.freshness.staleWhileRevalidate
      else {
        return nil
      }
      revalidateInBackground(request, client: client)
      thumbnail.source = current
      metrics.countStaleServed()
      return ImageResponse(thumbnail: thumbnail, source: .stale)
    case .changed:
      sourceState.sourceChanged(request.url)
      return nil
    case .superseded:
      memoryCache.removeValue(forKey: request)
      return nil
    }
  }

  /// Starts (or joins) the thumbnail job for `request` with no one waiting for its answer:
  /// the job revalidates the stale entry and stores what it learns.
  private func revalidateInBackground(_ request: ImageRequest, client: ClientID) {
    let spec = request.spec
    let id = nextID()
    Task {
      _ = try? await thumbnails.value(
        for: request, subscriber: id, priority: PriorityBox(.normal), client: client
      ) { request, context in
        try await self.job.produce(request, spec, context)
      }
    }
  }

  /// Drops every thumbnail of the source `raw` names, in any spelling (all sizes, formats and
  /// revisions) from memory and disk, with its source bytes, and returns how many entries went.
  /// Writes already scheduled land first, so none of them brings an entry back after the purge.
  public func purge(_ raw: String) async -> Int {
    let url = SourceURL.normalized(raw)
    metrics.countPurge()
    await diskWrites.flush()
    let inMemory = sourceState.forget(url)
    return inMemory + (await sourceState.removeFromDisk(url))
  }

  /// The placeholder known in memory for `url` at `rev`, while the source still holds what it
  /// was made from: a file is `stat`ed after `received` (shared within a pass, as a memory
  /// hit's is), an origin's is judged by the newest version known and its freshness. nil
  /// otherwise; one made from content the source no longer holds is forgotten. No other I/O.
  public func placeholder(
    for url: String, rev: String? = nil, received: ContinuousClock.Instant = .now
  ) -> Placeholder? {
    placeholderKeeper.placeholder(for: url, rev: rev, received: received)
  }

  /// The placeholder to name beside `thumbnail` (of `url` at `rev`, just judged current): the
  /// one known for the same content, so every size shows one look, else the thumbnail's own,
  /// else one made from its pixels (a disk hit carries none, and the one known may be of
  /// another version of a file rewritten meanwhile). Never one of other content.
  public func placeholder(for url: String, rev: String?, of thumbnail: Thumbnail) -> Placeholder? {
    placeholderKeeper.placeholder(for: url, rev: rev, of: thumbnail)
  }

  /// The placeholder known for `url` at `rev`, in memory or on disk (read back into memory),
  /// judged against the source as `placeholder(for:rev:received:)` judges.
  public func storedPlaceholder(
    for url: String, rev: String? = nil, received: ContinuousClock.Instant = .now
  ) async -> Placeholder? {
    await placeholderKeeper.storedPlaceholder(for: url, rev: rev, received: received)
  }

  /// The placeholder of `thumbnail` (of `url` at `rev`), its own or made from its bytes, kept
  /// as a rendered one's would be; nil when it has none and does not decode.
  public func keepPlaceholder(decoding thumbnail: Thumbnail, url: String, rev: String?)
    -> Placeholder?
  {
    placeholderKeeper.keepPlaceholder(decoding: thumbnail, url: url, rev: rev)
  }
}
