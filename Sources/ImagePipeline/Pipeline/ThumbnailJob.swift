extension ThumbnailPipeline {
  /// The thumbnail stage's job: disk cache, else fetch (shared per URL) and decode on a
  /// worker; prefetch jobs first wait for a place (see `PrefetchAdmission`).
  func produce(_ request: ImageRequest, _ context: JobContext) async throws -> Produced {
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
}
