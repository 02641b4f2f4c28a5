extension ThumbnailPipeline {
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
    /// Placeholders on disk (`PlaceholderIndex`), apart from the thumbnails so they never
    /// count against a source's variants or the thumbnail cache's figures.
    public var placeholderCache: DiskCache?
    /// Seconds a failure is remembered and answered without new work; 0 caches no failure.
    public var negativeCacheSeconds: Double
    /// Bytes the pipeline's work may hold at once: source bytes in flight, decode estimates
    /// and the memory cache (see `MemoryBudget`). docs/CONFIG.md gives the sizing rule.
    public var memoryBudget: Int
    /// Bytes a download reserves before it starts. A larger body of known size (a file's, a
    /// `Content-Length`) waits for room for all of it; one of unknown length is counted as it
    /// comes.
    public var downloadReservation: Int
    /// Seconds without work after which the allocator's free memory goes back to the kernel
    /// (`malloc_trim`); 0 never trims. See `AllocatorTrim`.
    public var trimWhenIdle: Double
    /// The process's own memory, counted against `memoryBudget` beyond an allowance, so the
    /// budget bounds the process and not only its work; nil (the default) counts work alone.
    /// Only for a pipeline that has its process to itself (`thumbd serve`): in a process that
    /// does other things, their memory would take the pipeline's room.
    public var processMemory: ProcessMemory?
    /// Thumbnails of one source the memory cache holds at most, oldest out first; 0 for no
    /// bound. The disk cache's own bound is given when it is made (`maxEntriesPerGroup`).
    public var maxVariantsPerSource: Int

    /// Creates a configuration with defaults for everything but the loader.
    public init(
      dataLoader: any DataLoading, thumbnailer: Thumbnailer = Thumbnailer(),
      memoryCacheCostLimit: Int = 64 << 20, memoryCacheCountLimit: Int = 4096,
      maxConcurrentFetches: Int = 16, maxFetchesPerOrigin: Int = 8,
      decodeThreads: Int = ThumbnailPipeline.coreCount,
      maxQueuedDecodes: Int = 1024, maxPrefetchInProgress: Int = 8, diskCache: DiskCache? = nil,
      sourceCache: DiskCache? = nil, negativeCacheSeconds: Double = 0,
      memoryBudget: Int = 256 << 20, downloadReservation: Int = 4 << 20,
      trimWhenIdle: Double = 2, maxVariantsPerSource: Int = 0,
      placeholderCache: DiskCache? = nil
    ) {
      self.placeholderCache = placeholderCache
      self.maxVariantsPerSource = maxVariantsPerSource
      self.trimWhenIdle = trimWhenIdle
      self.memoryBudget = memoryBudget
      self.downloadReservation = downloadReservation
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
}
