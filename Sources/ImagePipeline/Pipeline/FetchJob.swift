extension ThumbnailPipeline {
  /// The fetch stage's job: wait for a download slot in priority order, then load.
  func fetch(_ url: String, _ context: JobContext) async throws -> [UInt8] {
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
