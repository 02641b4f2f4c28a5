extension ThumbnailPipeline {
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
      queuedFetches: fetchLimiter.queued, fetchSlotsInUse: fetchLimiter.active,
      queuedDecodes: decodes.queued,
      runningDecodes: decodes.running, prefetchInProgress: prefetchAdmission.inProgress,
      queuedPrefetch: prefetchAdmission.queued)
  }
}
