import Synchronization
import ThumbSystem

/// What the pipeline knows of each source, and how it lets go of a source that changed: the
/// one stage every other asks whether a cached entry still shows its source (`verdict`), and
/// the one that removes every trace of a source from memory and disk. Built from the few parts
/// it uses: the catalog of versions, the loader (a file's current stamp), the memory cache and
/// placeholder index, and the disk caches.
final class SourceState: Sendable {
  /// The newest version known of each source.
  let catalog: SourceCatalog
  private let loader: any DataLoading
  private let memory: MemoryCache<ImageRequest, Thumbnail>
  private let placeholders: PlaceholderIndex
  private let disk: DiskCache?
  private let placeholderDisk: DiskCache?
  private let sourceDisk: DiskCache?
  private let metrics: PipelineMetrics
  /// Disk removals of changed sources still running, by URL (see `sourceChanged`).
  private let diskRemovals = Mutex<[String: (id: UInt64, task: Task<Void, Never>)]>([:])
  /// The pipeline's numbers, one for each removal.
  private let ids: SubscriberIDs

  /// A record over `catalog`, judging files through `loader` and forgetting sources in
  /// `memory`, `placeholders` and the disk caches.
  init(
    catalog: SourceCatalog, loader: any DataLoading,
    memory: MemoryCache<ImageRequest, Thumbnail>, placeholders: PlaceholderIndex,
    disk: DiskCache?, placeholderDisk: DiskCache?, sourceDisk: DiskCache?, ids: SubscriberIDs,
    metrics: PipelineMetrics
  ) {
    self.ids = ids
    self.catalog = catalog
    self.loader = loader
    self.memory = memory
    self.placeholders = placeholders
    self.disk = disk
    self.placeholderDisk = placeholderDisk
    self.sourceDisk = sourceDisk
    self.metrics = metrics
  }

  /// Judges an entry made from `stored`: files by a `stat` made after `received` (the
  /// request's arrival; any difference is a change), other sources by the newest version
  /// known and its freshness at `now` (read only for them).
  func verdict(
    for url: String, stored: SourceVersion, now: @autoclosure () -> Double = WallClock.now(),
    received: ContinuousClock.Instant = .now
  ) -> SourceVerdict {
    if case .file = stored.validator {
      let current = loader.currentValidator(of: url, notBefore: received)
      guard current == stored.validator else {
        return .changed
      }
      return .fresh(stored)
    }
    let current = catalog.version(of: url) ?? stored
    guard current.sameContent(as: stored) else { return .superseded }
    return now() < current.freshness.freshUntil ? .fresh(current) : .stale(current)
  }

  /// A source holds other content now: every thumbnail of it (all sizes, formats and
  /// revisions) leaves memory at once and the disk soon after, with its cached bytes. For
  /// the request path, which cannot wait for the disk; a job awaits the other form.
  func sourceChanged(_ url: String) {
    metrics.countSourceChange()
    forget(url)
    let id = ids.next()
    let removal = Task {
      await removeFromDisk(url)
      diskRemovals.withLock { if $0[url]?.id == id { $0[url] = nil } }
    }
    diskRemovals.withLock { $0[url] = (id, removal) }
  }

  /// Waits for a removal `sourceChanged` started for `url`: a job must not find the old
  /// thumbnails on disk while they are being removed (it would judge the source changed a
  /// second time).
  func diskRemovalFinished(_ url: String) async {
    guard let removal = diskRemovals.withLock({ $0[url] }) else { return }
    await removal.task.value
  }

  /// The same, done before it returns, so nothing the caller stores afterwards (the new
  /// thumbnail, the new source bytes the fetch just cached, with `keepingSourceBytes`) can
  /// be removed by it.
  func sourceChanged(_ url: String, keepingSourceBytes: Bool) async {
    metrics.countSourceChange()
    forget(url)
    await removeFromDisk(url, sourceBytes: !keepingSourceBytes)
  }

  /// Removes `url` from memory and from the catalog; the entries removed.
  @discardableResult
  func forget(_ url: String) -> Int {
    catalog.forget(url)
    placeholders.forget(url: url)
    return memory.removeAll { $0.url == url }
  }

  /// Removes every disk entry of `url` (thumbnails, and its source bytes unless told
  /// otherwise); the entries removed.
  @discardableResult
  func removeFromDisk(_ url: String, sourceBytes: Bool = true) async -> Int {
    var removed = await disk?.removeGroup(ThumbnailDiskFormat.group(for: url)) ?? 0
    // Its placeholders go too (not counted: they are no thumbnails).
    _ = await placeholderDisk?.removeGroup(PlaceholderIndex.diskGroup(url: url))
    if sourceBytes,
      await sourceDisk?.removeValue(forKey: ThumbnailDiskFormat.sourceKey(for: url)) == true
    {
      removed += 1
    }
    return removed
  }
}
