import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The loader: memory cache in front of two coalescing stages, one download per URL and one
/// decode per URL + spec, with bounded, priority-ordered concurrency in each.
public final class ThumbnailPipeline: Sendable {
  /// Knobs for a pipeline.
  public struct Configuration: Sendable {
    /// Where source bytes come from.
    public var dataLoader: any DataLoading
    /// Decoding limits and resampling choices.
    public var thumbnailer: Thumbnailer
    /// Memory cache budget in bytes of encoded thumbnails.
    public var memoryCacheCostLimit: Int
    /// Memory cache entry limit.
    public var memoryCacheCountLimit: Int
    /// Downloads running at once; more wait in priority order.
    public var maxConcurrentFetches: Int
    /// Downloads from one origin (host and port) at once, so an origin that never answers
    /// cannot hold the slots others need.
    public var maxFetchesPerOrigin: Int
    /// Decode threads (default: the number of cores).
    public var decodeThreads: Int
    /// Decodes allowed to wait; past that, requests fail with `PipelineError.queueFull`.
    public var maxQueuedDecodes: Int
    /// Prefetch jobs in progress at once (downloading, waiting for a decode or decoding),
    /// shared fairly between clients; more wait. See `PrefetchAdmission`.
    public var maxPrefetchInProgress: Int
    /// Encoded thumbnails on disk, consulted after the memory cache.
    public var diskCache: DiskCache?
    /// Source bytes on disk under their own budget, so another size of a URL needs no new
    /// download.
    public var sourceCache: DiskCache?
    /// Seconds a failure is remembered and answered without new work; 0 caches no failure.
    public var negativeCacheSeconds: Double

    /// Creates a configuration with defaults for everything but the loader.
    public init(
      dataLoader: any DataLoading, thumbnailer: Thumbnailer = Thumbnailer(),
      memoryCacheCostLimit: Int = 64 << 20, memoryCacheCountLimit: Int = 4096,
      maxConcurrentFetches: Int = 16, maxFetchesPerOrigin: Int = 8,
      decodeThreads: Int = ThumbnailPipeline.coreCount,
      maxQueuedDecodes: Int = 1024, maxPrefetchInProgress: Int = 8, diskCache: DiskCache? = nil,
      sourceCache: DiskCache? = nil, negativeCacheSeconds: Double = 0
    ) {
      self.dataLoader = dataLoader
      self.thumbnailer = thumbnailer
      self.memoryCacheCostLimit = memoryCacheCostLimit
      self.memoryCacheCountLimit = memoryCacheCountLimit
      self.maxConcurrentFetches = maxConcurrentFetches
      self.maxFetchesPerOrigin = maxFetchesPerOrigin
      self.decodeThreads = decodeThreads
      self.maxQueuedDecodes = maxQueuedDecodes
      self.maxPrefetchInProgress = maxPrefetchInProgress
      self.diskCache = diskCache
      self.sourceCache = sourceCache
      self.negativeCacheSeconds = negativeCacheSeconds
    }
  }

  /// Online processor cores.
  public static var coreCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

  /// Encoded thumbnails by request.
  public let memoryCache: MemoryCache<ImageRequest, Thumbnail>
  /// What the pipeline has done so far.
  public let metrics: PipelineMetrics
  /// The disk cache of thumbnails, if there is one.
  public var diskCache: DiskCache? { configuration.diskCache }
  let configuration: Configuration
  let fetches: CoalescingStage<String, [UInt8]>
  let thumbnails: CoalescingStage<ImageRequest, Produced>
  let failures: NegativeCache<ImageRequest>
  let fetchLimiter: PriorityLimiter
  let prefetchAdmission: PrefetchAdmission
  let visibleActivity = VisibleActivity()
  let decoders: DecodeWorkers
  let diskWrites: WriteBehind
  private let ids = Atomic<UInt64>(0)

  /// Creates a pipeline and starts its decode threads.
  public init(configuration: Configuration) {
    let metrics = PipelineMetrics()
    self.configuration = configuration
    self.metrics = metrics
    memoryCache = MemoryCache(
      costLimit: configuration.memoryCacheCostLimit,
      countLimit: configuration.memoryCacheCountLimit)
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
  }

  /// What the thumbnail stage produces: the thumbnail and whether the disk cache had it.
  struct Produced: Sendable {
    let thumbnail: Thumbnail
    let fromDisk: Bool
  }

  deinit { decoders.shutdown() }

  /// Starts loading `request` for `client` and returns a handle to await, reprioritise or
  /// cancel it.
  public func task(
    for request: ImageRequest, priority: ImagePriority = .normal, client: ClientID = .shared
  ) -> ImageTask {
    ImageTask(request: request, priority: priority, client: client, pipeline: self, id: nextID())
  }

  /// Loads `request` for `client`; the subscription lasts as long as the calling task.
  public func response(
    for request: ImageRequest, priority: ImagePriority = .normal, client: ClientID = .shared
  ) async throws -> ImageResponse {
    try await load(request, id: nextID(), priority: PriorityBox(priority), client: client)
  }

  /// Waits until every thumbnail delivered so far is on disk (writes happen after delivery),
  /// or until the calling task is cancelled. A server calls it before exiting.
  public func flushDiskWrites() async {
    await diskWrites.flush()
  }

  /// The response for `request` if the memory cache has it, without suspending: servers answer
  /// hits on their I/O thread and start a task only for the rest. Counted like any request; a
  /// visible one also counts as visible activity (see `PrefetchAdmission`). `request.spec`
  /// must be valid.
  public func cachedResponse(
    for request: ImageRequest, priority: ImagePriority = .visible, client: ClientID = .shared
  ) -> ImageResponse? {
    let started = ContinuousClock.now
    if priority == .visible { visibleActivity.note(client) }
    guard let thumbnail = memoryCache.value(forKey: request) else { return nil }
    metrics.countRequest()
    metrics.countMemoryHit()
    metrics.observe("total", started.duration(to: .now).seconds)
    return ImageResponse(thumbnail: thumbnail, source: .memory)
  }

  /// How much work is waiting and running, per stage, at this moment.
  public struct Workload: Sendable, Hashable {
    /// Thumbnail jobs (one per URL + spec) with at least one subscriber.
    public var thumbnailsInFlight: Int
    /// Downloads (one per URL) with at least one subscriber.
    public var fetchesInFlight: Int
    /// Downloads waiting for a slot.
    public var queuedFetches: Int
    /// Download slots held (downloads running, their name lookups included).
    public var fetchSlotsInUse: Int
    /// Decodes waiting for a thread.
    public var queuedDecodes: Int
    /// Decodes running.
    public var runningDecodes: Int
    /// Prefetch jobs holding a place (see `maxPrefetchInProgress`).
    public var prefetchInProgress: Int
    /// Prefetch jobs waiting for a place.
    public var queuedPrefetch: Int
  }

  /// The current workload, for metrics and load shedding.
  public func workload() async -> Workload {
    let decodes = decoders.load
    return Workload(
      thumbnailsInFlight: await thumbnails.inFlight, fetchesInFlight: await fetches.inFlight,
      queuedFetches: await fetchLimiter.queued, fetchSlotsInUse: await fetchLimiter.active,
      queuedDecodes: decodes.queued,
      runningDecodes: decodes.running, prefetchInProgress: await prefetchAdmission.inProgress,
      queuedPrefetch: await prefetchAdmission.queued)
  }

  func nextID() -> UInt64 { ids.add(1, ordering: .relaxed).newValue }

  func load(
    _ request: ImageRequest, id: UInt64, priority: PriorityBox, client: ClientID = .shared
  ) async throws -> ImageResponse {
    let started = ContinuousClock.now
    metrics.countRequest()
    defer { metrics.observe("total", started.duration(to: .now).seconds) }
    if priority.value == .visible { visibleActivity.note(client) }
    do {
      try request.spec.validate()
    } catch {
      metrics.countError(error.kind)
      throw PipelineError.thumbnail(error)
    }
    if let thumbnail = memoryCache.value(forKey: request) {
      metrics.countMemoryHit()
      return ImageResponse(thumbnail: thumbnail, source: .memory)
    }
    if let remembered = failures.failure(for: request) {
      metrics.countError(remembered.kind)
      throw remembered
    }
    do {
      let delivery = try await thumbnails.value(
        for: request, subscriber: id, priority: priority, client: client
      ) { request, context in
        try await self.produce(request, context)
      }
      if delivery.joined {
        return ImageResponse(thumbnail: delivery.value.thumbnail, source: .coalesced)
      }
      if delivery.value.fromDisk {
        metrics.countDiskHit()
        return ImageResponse(thumbnail: delivery.value.thumbnail, source: .disk)
      }
      metrics.countMiss()
      return ImageResponse(thumbnail: delivery.value.thumbnail, source: .miss)
    } catch let error as PipelineError {
      metrics.countError(error.kind)
      if error != .queueFull { failures.remember(error, for: request) }
      throw error
    }
  }

  /// The thumbnail stage's job: disk cache, else fetch (shared per URL) and decode on a
  /// worker; prefetch jobs first wait for a place (see `PrefetchAdmission`).
  private func produce(_ request: ImageRequest, _ context: JobContext) async throws -> Produced {
    let diskKey = ThumbnailDiskFormat.key(for: request)
    if let disk = configuration.diskCache, let entry = await disk.data(forKey: diskKey),
      let thumbnail = ThumbnailDiskFormat.thumbnail(
        metadata: entry.metadata, payload: entry.payload)
    {
      memoryCache.setValue(thumbnail, forKey: request, cost: thumbnail.data.count)
      return Produced(thumbnail: thumbnail, fromDisk: true)
    }
    let admission = prefetchAdmission
    let placeID = nextID()
    context.onPriorityChange { Task { await admission.priorityChanged(id: placeID) } }
    let hasPlace = try await admission.enter(
      id: placeID, client: context.client, priority: context.priority,
      isWanted: { [weak context] in context?.isWanted ?? false })
    do {
      let thumbnail = try await fetchAndDecode(request, context)
      if hasPlace { await admission.leave(client: context.client) }
      memoryCache.setValue(thumbnail, forKey: request, cost: thumbnail.data.count)
      if let disk = configuration.diskCache {
        // Delivered first, written after: a reply never waits for the disk.
        let dropped = !diskWrites.schedule {
          await disk.store(
            payload: thumbnail.data, metadata: ThumbnailDiskFormat.metadata(of: thumbnail),
            forKey: diskKey)
        }
        if dropped { metrics.countDiskWriteSkipped() }
      }
      return Produced(thumbnail: thumbnail, fromDisk: false)
    } catch {
      if hasPlace { await admission.leave(client: context.client) }
      throw error
    }
  }

  private func fetchAndDecode(_ request: ImageRequest, _ context: JobContext) async throws
    -> Thumbnail
  {
    let upstream = PriorityBox(context.priority.value)
    // Holding the box, not the context: a listener that held its own context would keep it
    // (and every listener) alive for ever.
    let priority = context.priority
    context.onPriorityChange { [fetches] in
      upstream.value = priority.value
      Task { await fetches.priorityChanged(for: request.url) }
    }
    let bytes = try await fetches.value(
      for: request.url, subscriber: nextID(), priority: upstream, client: context.client
    ) { url, fetchContext in
      try await self.fetch(url, fetchContext)
    }.value
    let thumbnailer = configuration.thumbnailer
    let enqueued = ContinuousClock.now
    return try await decoders.run(id: nextID(), context: context) { [metrics] cancellation in
      metrics.observe("queue", enqueued.duration(to: .now).seconds)
      metrics.countDecode()
      do throws(ThumbnailError) {
        let (thumbnail, timings) = try thumbnailer.measuredThumbnail(
          of: bytes, spec: request.spec, cancellation: cancellation)
        metrics.observe("decode", timings.decode)
        metrics.observe("encode", timings.encode)
        return thumbnail
      } catch {
        if error == .cancelled { throw CancellationError() }
        throw PipelineError.thumbnail(error)
      }
    }
  }

  /// The fetch stage's job: wait for a download slot in priority order, then load.
  private func fetch(_ url: String, _ context: JobContext) async throws -> [UInt8] {
    let sourceKey = ThumbnailDiskFormat.sourceKey(for: url)
    if let sources = configuration.sourceCache, let entry = await sources.data(forKey: sourceKey) {
      return entry.payload
    }
    let limiter = fetchLimiter
    context.onPriorityChange { Task { await limiter.reconsider() } }
    let origin = (try? SourceURL(url)).map { "\($0.host):\($0.port)" } ?? ""
    let slot = try await fetchLimiter.acquire(
      id: nextID(), priority: context.priority, client: context.client, origin: origin)
    do {
      let started = ContinuousClock.now
      let bytes = try await configuration.dataLoader.loadData(for: url)
      metrics.observe("fetch", started.duration(to: .now).seconds)
      await fetchLimiter.release(slot)
      metrics.countFetch(bytes: bytes.count)
      await configuration.sourceCache?.store(payload: bytes, forKey: sourceKey)
      return bytes
    } catch let error as FetchError {
      await fetchLimiter.release(slot)
      throw PipelineError.fetch(error)
    } catch {
      await fetchLimiter.release(slot)
      throw error
    }
  }
}

/// A consumer's handle on one request: await it, change its priority, or leave.
public final class ImageTask: Sendable {
  /// What was asked for.
  public let request: ImageRequest
  private let priorityBox: PriorityBox
  private let pipeline: ThumbnailPipeline
  private let task: Task<ImageResponse, any Error>

  init(
    request: ImageRequest, priority: ImagePriority, client: ClientID,
    pipeline: ThumbnailPipeline, id: UInt64
  ) {
    let box = PriorityBox(priority)
    self.request = request
    self.priorityBox = box
    self.pipeline = pipeline
    task = Task { try await pipeline.load(request, id: id, priority: box, client: client) }
  }

  /// The current priority.
  public var priority: ImagePriority { priorityBox.value }

  /// Changes the priority; queued work is reordered and the upstream download follows.
  public func setPriority(_ priority: ImagePriority) {
    priorityBox.value = priority
    let (stage, request) = (pipeline.thumbnails, request)
    Task { await stage.priorityChanged(for: request) }
  }

  /// Leaves: this consumer gets `CancellationError`; the work stops only if nobody else wants it.
  public func cancel() { task.cancel() }

  /// The response, once it is ready.
  public var response: ImageResponse {
    get async throws { try await task.value }
  }
}
