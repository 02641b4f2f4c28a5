extension ThumbnailPipeline {
  /// Judges an entry made from `stored`: files by a `stat` made after `received` (the
  /// request's arrival; any difference is a change), other sources by the newest version
  /// known and its freshness at `now` (read only for them).
  func verdict(
    for url: String, stored: SourceVersion, now: @autoclosure () -> Double = WallClock.now(),
    received: ContinuousClock.Instant = .now
  ) -> SourceVerdict {
    if case .file = stored.validator {
      let current = configuration.dataLoader.currentValidator(of: url, notBefore: received)
      guard current == stored.validator else {
        return .changed
      }
      return .fresh(stored)
    }
    let current = sources.version(of: url) ?? stored
    guard current.sameContent(as: stored) else { return .superseded }
    return now() < current.freshness.freshUntil ? .fresh(current) : .stale(current)
  }

  /// A memory hit that may be served now, without suspending, or nil. A changed source is
  /// dropped on the spot; a stale one inside its `stale-while-revalidate` window is served
  /// (`.stale`) while one revalidation starts.
  func memoryHit(
    _ request: ImageRequest, priority: ImagePriority, client: ClientID,
    received: ContinuousClock.Instant = .now
  ) -> ImageResponse? {
    guard var thumbnail = memoryCache.value(forKey: request) else { return nil }
    switch verdict(for: request.url, stored: thumbnail.source, received: received) {
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
      sourceChanged(request.url)
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
        try await self.produce(request, spec, context)
      }
    }
  }

  /// A source holds other content now: every thumbnail of it (all sizes, formats and
  /// revisions) leaves memory at once and the disk soon after, with its cached bytes. For
  /// the request path, which cannot wait for the disk; a job awaits the other form.
  func sourceChanged(_ url: String) {
    metrics.countSourceChange()
    forgetSource(url)
    let id = nextID()
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
    forgetSource(url)
    await removeFromDisk(url, sourceBytes: !keepingSourceBytes)
  }

  /// Removes `url` from memory and from the catalog; the entries removed.
  @discardableResult
  func forgetSource(_ url: String) -> Int {
    sources.forget(url)
    placeholders.forget(url: url)
    return memoryCache.removeAll { $0.url == url }
  }

  /// Removes every disk entry of `url` (thumbnails, and its source bytes unless told
  /// otherwise); the entries removed.
  @discardableResult
  func removeFromDisk(_ url: String, sourceBytes: Bool = true) async -> Int {
    var removed =
      await configuration.diskCache?.removeGroup(ThumbnailDiskFormat.group(for: url)) ?? 0
    // Its placeholders go too (not counted: they are no thumbnails).
    _ = await configuration.placeholderCache?.removeGroup(PlaceholderIndex.diskGroup(url: url))
    if sourceBytes,
      await configuration.sourceCache?.removeValue(
        forKey: ThumbnailDiskFormat.sourceKey(for: url)) == true
    {
      removed += 1
    }
    return removed
  }

  /// Drops every thumbnail of the source `raw` names, in any spelling (all sizes, formats and
  /// revisions) from memory and disk, with its source bytes, and returns how many entries went.
  /// Writes already scheduled land first, so none of them brings an entry back after the purge.
  public func purge(_ raw: String) async -> Int {
    let url = SourceURL.normalized(raw)
    metrics.countPurge()
    await diskWrites.flush()
    let inMemory = forgetSource(url)
    return inMemory + (await removeFromDisk(url))
  }
}
