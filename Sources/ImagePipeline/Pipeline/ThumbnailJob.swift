import ThumbSystem

/// Where thumbnails are kept: the memory cache, the one place they enter memory (which then
/// gives way to work if the budget needs it), and the disk cache, written behind delivery.
struct ThumbnailStore: Sendable {
  let memory: MemoryCache<ImageRequest, Thumbnail>
  /// The budget the memory cache gives way to.
  let budget: MemoryBudget
  /// The disk cache, if any.
  let disk: DiskCache?
  /// Where disk writes wait behind delivery.
  let diskWrites: WriteBehind
  let metrics: PipelineMetrics

  /// Keeps `thumbnail` in the memory cache.
  func cache(_ thumbnail: Thumbnail, for request: ImageRequest) {
    memory.setValue(thumbnail, forKey: request, cost: thumbnail.data.count)
    budget.trimCacheIfNeeded()
  }

  /// Keeps `thumbnail` in memory and, after delivery, on disk under `diskKey` in `group`.
  func store(_ thumbnail: Thumbnail, for request: ImageRequest, diskKey: String, group: String) {
    cache(thumbnail, for: request)
    guard let disk else { return }
    // Delivered first, written after: a reply never waits for the disk.
    let dropped = !diskWrites.schedule {
      await disk.store(
        payload: thumbnail.data, metadata: ThumbnailDiskFormat.metadata(of: thumbnail),
        forKey: diskKey, group: group)
    }
    if dropped { metrics.countDiskWriteSkipped() }
  }
}

/// The thumbnail stage's job. A cached copy (a stale one from memory, else the disk's) is
/// judged first: fresh, it is served; stale, the source is asked once whether it changed (a
/// 304 keeps the copy, with no download and no decode); changed, every copy of the source
/// goes. Otherwise the source is fetched (shared per URL, by `FetchJob`) and decoded on a
/// worker; prefetch jobs first wait for a place (see `PrefetchAdmission`). Built once, by the
/// pipeline, from the parts it uses.
struct ThumbnailJob: Sendable {
  /// How many times one job reads a file that changed under a failed decode.
  static let fileReadAttempts = 3

  /// Where thumbnails are kept.
  let store: ThumbnailStore
  /// The judge of a cached copy, and what forgets a changed source.
  let sources: SourceState
  /// Places for prefetch jobs.
  let admission: PrefetchAdmission
  /// The fetch stage, and its job.
  let fetches: CoalescingStage<FetchKey, FetchedSource>
  let fetch: FetchJob
  /// Previews: made by `previews`, from a download's first bytes when they carry one.
  let previews: PreviewMaker
  let previewDemand: PreviewDemand
  /// The decoder, its threads and the memory its work is held in.
  let thumbnailer: Thumbnailer
  let decoders: DecodeWorkers
  let budget: MemoryBudget
  /// Where a new thumbnail's placeholder is kept.
  let placeholders: PlaceholderKeeper
  /// Subscriber and place numbers.
  let ids: SubscriberIDs
  let metrics: PipelineMetrics

  /// The thumbnail of `request`, made at `spec`, for `context`'s consumers, and where it came
  /// from (`.miss` for a new render; the caller makes a joined one `.coalesced`).
  func produce(
    _ request: ImageRequest, _ spec: ValidSpec, _ context: JobContext
  ) async throws -> ImageResponse {
    // No preview once the job has returned: the stage hands its result on after this.
    defer {
      context.previews.close()
      previews.published.forget(request)
    }
    let diskKey = ThumbnailDiskFormat.key(for: request, filter: thumbnailer.filter)
    let group = ThumbnailDiskFormat.group(for: request.url)
    var candidate = store.memory.peek(request)
    var fromDisk = false
    await sources.diskRemovalFinished(request.url)
    if candidate == nil, let disk = store.disk,
      let entry = await disk.data(forKey: diskKey, group: group)
    {
      candidate = ThumbnailDiskFormat.thumbnail(metadata: entry.metadata, payload: entry.payload)
      fromDisk = candidate != nil
    }
    var known: SourceVersion?
    if var cached = candidate {
      switch sources.verdict(for: request.url, stored: cached.source, now: WallClock.now()) {
      case .fresh(let current):
        cached.source = current
        if fromDisk {
          if sources.catalog.version(of: request.url) == nil {
            sources.catalog.record(current, for: request.url)
          }
          store.cache(cached, for: request)
        }
        return ImageResponse(thumbnail: cached, source: fromDisk ? .disk : .memory)
      case .stale(let current):
        cached.source = current
        candidate = cached
        known = current
      case .changed:
        await sources.sourceChanged(request.url, keepingSourceBytes: false)
        candidate = nil
      case .superseded:
        store.memory.removeValue(forKey: request)
        await store.disk?.removeValue(forKey: diskKey, group: group)
        candidate = nil
      }
    }
    let admission = admission
    let placeID = ids.next()
    context.onPriorityChange { admission.priorityChanged(id: placeID) }
    let hasPlace = try await admission.enter(
      id: placeID, client: context.client, priority: context.priority,
      isWanted: { [weak context] in context?.isWanted ?? false })
    do {
      let produced = try await revalidateOrRender(
        request, spec, candidate: candidate, known: known, diskKey: diskKey, group: group,
        context)
      if hasPlace { admission.leave(client: context.client) }
      return produced
    } catch {
      if hasPlace { admission.leave(client: context.client) }
      throw error
    }
  }

  /// Asks the source about a stale `candidate` (made from `known`), or fetches it anew, and
  /// renders what changed.
  private func revalidateOrRender(
    _ request: ImageRequest, _ spec: ValidSpec, candidate: Thumbnail?, known: SourceVersion?,
    diskKey: String, group: String, _ context: JobContext, attempt: Int = 1
  ) async throws -> ImageResponse {
    let fetched: FetchedSource
    do {
      fetched = try await fetchSource(
        FetchKey(
          url: request.url, cached: known?.validator, revalidate: request.rev != nil,
          rev: request.rev),
        for: request, context)
    } catch let error as PipelineError {
      guard let stale = candidate, let known, case .fetch = error else { throw error }
      metrics.countRevalidation(.error)
      // A stale copy may stand in for a failing origin only inside its allowance.
      guard WallClock.now() < known.freshness.freshUntil + known.freshness.staleIfError else {
        throw error
      }
      metrics.countStaleServed()
      return ImageResponse(thumbnail: stale, source: .stale)
    }
    switch fetched.response {
    case .notModified(let renewal):
      guard var cached = candidate, let known else {
        throw PipelineError.fetch(.badResponse("not modified, though nothing was cached"))
      }
      cached.source = known.renewed(by: renewal)
      return keep(cached, for: request)
    case .modified(let bytes, let version):
      if var cached = candidate, let known, version.sameContent(as: known) {
        // The same bytes again (an origin without validators): nothing to decode.
        cached.source = version
        return keep(cached, for: request)
      }
      if known != nil {
        metrics.countRevalidation(.changed)
        // The fetch stage has just cached the new bytes: only the old thumbnails go.
        await sources.sourceChanged(request.url, keepingSourceBytes: true)
      }
      sources.catalog.record(version, for: request.url)
      // The source's bytes stay counted in the budget until the last decode of them ends.
      var thumbnail: Thumbnail
      do {
        thumbnail = try await decode(bytes, request, spec, context)
      } catch PipelineError.thumbnail(let error) where error != .cancelled {
        // A file read while it was rewritten may fail where the file as it is now would not
        // (cut short, or empty between its truncation and its write); a failure stands only
        // for the file as it still is, as a thumbnail does. Every consumer of this job,
        // those that came after the read included, gets that answer.
        guard case .file = version.validator, attempt < Self.fileReadAttempts,
          case .changed = sources.verdict(for: request.url, stored: version)
        else { throw PipelineError.thumbnail(error) }
        await sources.sourceChanged(request.url, keepingSourceBytes: false)
        return try await revalidateOrRender(
          request, spec, candidate: nil, known: nil, diskKey: diskKey, group: group, context,
          attempt: attempt + 1)
      }
      withExtendedLifetime(fetched) {}
      thumbnail.source = version
      placeholders.recordPlaceholder(of: thumbnail, for: request)
      keepNew(thumbnail, for: request, diskKey: diskKey, group: group)
      return ImageResponse(thumbnail: thumbnail, source: .miss)
    }
  }

  /// A cached copy the source confirmed: its renewed version becomes the source's newest, so
  /// every size of it is fresh again.
  private func keep(_ thumbnail: Thumbnail, for request: ImageRequest)
    -> ImageResponse
  {
    metrics.countRevalidation(.unchanged)
    sources.catalog.record(thumbnail.source, for: request.url)
    if thumbnail.source.freshness.mayStore {
      store.cache(thumbnail, for: request)
    }
    return ImageResponse(thumbnail: thumbnail, source: .revalidated)
  }

  /// Keeps a new thumbnail in memory and (after delivery) on disk, unless its source forbids,
  /// or a newer version of the source arrived while it was being made: an older picture never
  /// overwrites a newer one.
  private func keepNew(
    _ thumbnail: Thumbnail, for request: ImageRequest, diskKey: String, group: String
  ) {
    guard thumbnail.source.freshness.mayStore,
      sources.catalog.version(of: request.url).map({ $0.sameContent(as: thumbnail.source) })
        ?? true
    else { return }
    store.store(thumbnail, for: request, diskKey: diskKey, group: group)
  }

  /// The source's answer to `key`, shared by every thumbnail job that asks the same.
  private func fetchSource(
    _ key: FetchKey, for request: ImageRequest, _ context: JobContext
  ) async throws -> FetchedSource {
    let subscriber = ids.next()
    // For consumers that want a preview (now, or by the time they arrive): the download's
    // first bytes, when they carry one, are made into it on a decode thread while the rest
    // arrives.
    if previewDemand.wanted {
      fetch.previews.listen(key, id: subscriber) { [previews] bytes in
        guard previews.published.wants(request) else { return }
        Task { await previews.make(of: bytes, for: request, context) }
      }
    }
    defer { fetch.previews.stopListening(key, id: subscriber) }
    let upstream = PriorityBox(context.priority.value)
    // Holding the box, not the context: a listener that held its own context would keep it
    // (and every listener) alive for ever.
    let priority = context.priority
    context.onPriorityChange { [fetches] in
      upstream.value = priority.value
      Task { await fetches.priorityChanged(for: key) }
    }
    return try await fetches.value(
      for: key, subscriber: subscriber, priority: upstream, client: context.client
    ) { [fetch] key, fetchContext in
      try await fetch.run(key, fetchContext)
    }.value
  }

  private func decode(
    _ bytes: [UInt8], _ request: ImageRequest, _ spec: ValidSpec, _ context: JobContext
  ) async throws -> Thumbnail {
    // The header says what the decode will hold; it waits for that much of the budget
    // (a header the decoder rejects is reported by the decode itself, with its own error).
    // The header is parsed here, on the pool: bounded work (libjpeg stops at the first scan,
    // libpng at the first image data, both under the chunk limits).
    let estimate = try? thumbnailer.estimate(.bytes(bytes), spec: spec)
    context.onPriorityChange { [budget] in budget.reconsider() }
    let memory = try await budget.reserve(
      estimate?.bytes ?? 0, priority: context.priority, unblocks: true, holding: bytes.count,
      growth: estimate?.firstUse ?? 0)
    defer { memory.release() }
    let enqueued = ContinuousClock.now
    // A preview from the whole source, when the download's first bytes gave none (a HEIF's
    // thumbnail, a file, the source cache): made first in the decode's own turn on a decode
    // thread, so it comes ahead of the image without a second wait in the queue.
    let preview = previews.published.wants(request)
    return try await decoders.run(context: context) {
      [metrics, previews, thumbnailer] cancellation in
      if preview { previews.publish(of: bytes, for: request, context, cancellation) }
      metrics.observe("queue", enqueued.duration(to: .now).seconds)
      metrics.countDecode()
      do throws(ThumbnailError) {
        let (thumbnail, timings) = try thumbnailer.measuredThumbnail(
          .bytes(bytes), spec: spec, cancellation: cancellation)
        metrics.observe("decode", timings.decode)
        metrics.observe("encode", timings.encode)
        metrics.countProfile(thumbnail.profile)
        return thumbnail
      } catch {
        if error == .cancelled { throw CancellationError() }
        throw PipelineError.thumbnail(error)
      }
    }
  }
}
