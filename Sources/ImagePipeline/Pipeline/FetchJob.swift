import ThumbSystem

/// What the fetch stage shares: one answer per URL and cached validator. A revalidation and a
/// plain download of the same URL are different questions, so they do not share.
struct FetchKey: Hashable, Sendable {
  /// The source.
  let url: String
  /// The validator of the thumbnail's source version, for a revalidation.
  let cached: SourceValidator?
  /// Ask the source even when its cached bytes are fresh (a request with a new revision).
  let revalidate: Bool
  /// The revision the request names. A download is shared only by requests for the same
  /// revision: one for R+1 must not join a download begun for R, which may have started
  /// before the source changed (a session was shown older revisions that way).
  let rev: String?
}

/// A source's answer, with the memory its bytes hold in the budget: released when the last
/// job that shares it lets it go.
struct FetchedSource: Sendable {
  let response: SourceResponse
  let memory: MemoryHold?
}

/// The fetch stage's job: the source cache, judged like every cached entry, else a load
/// (conditional when a cached copy has validators) once a download slot is free, in priority
/// order. Built once, by the pipeline, from the parts it uses.
struct FetchJob: Sendable {
  /// Sources' bytes kept on disk, if any.
  let sourceDisk: DiskCache?
  /// What loads a source.
  let loader: any DataLoading
  /// The judge of a cached copy.
  let sources: SourceState
  /// The memory a download's bytes are held in.
  let budget: MemoryBudget
  /// Download slots, in priority order, per origin too.
  let limiter: PriorityLimiter
  /// Bytes a download reserves before it starts.
  let reservation: Int
  /// Where a download's first bytes are announced to the thumbnail jobs that want a preview.
  let previews: Announcements<FetchKey, [UInt8]>
  /// Whether any consumer wants previews now.
  let previewDemand: PreviewDemand
  let metrics: PipelineMetrics

  /// The source's answer to `key`, for every thumbnail job that asks the same.
  func run(_ key: FetchKey, _ context: JobContext) async throws -> FetchedSource {
    let sourceKey = ThumbnailDiskFormat.sourceKey(for: key.url)
    var conditional = key.cached
    var cachedSource: (bytes: [UInt8], version: SourceVersion)?
    if let store = sourceDisk, let entry = await store.data(forKey: sourceKey),
      let stored = ThumbnailDiskFormat.sourceVersion(metadata: entry.metadata)
    {
      switch sources.verdict(for: key.url, stored: stored, now: WallClock.now()) {
      case .fresh(let current) where !key.revalidate:
        return FetchedSource(
          response: .modified(entry.payload, current), memory: budget.hold(entry.payload.count))
      case .fresh(let current), .stale(let current):
        conditional = current.validator
        cachedSource = (entry.payload, current)
      case .changed, .superseded:
        await store.removeValue(forKey: sourceKey)
      }
    }
    if let validator = conditional, !validator.canRevalidate, !Self.isFile(validator) {
      conditional = nil
    }
    context.onPriorityChange { [budget, limiter] in
      budget.reconsider()
      limiter.reconsider()
    }
    // Parsed once per fetch: for the per-origin cap here, and handed to the loader.
    let parsed = try? SourceURL(key.url)
    let origin = parsed.map { "\($0.host):\($0.port)" } ?? ""
    let slot = try await limiter.acquire(
      priority: context.priority, client: context.client, origin: origin)
    let response: SourceResponse
    let memory: MemoryHold
    do {
      // A download first reserves a share of the budget. A body whose size is known before
      // it is taken (a file's; a `Content-Length`) and is larger waits for room for all of it
      // (`ByteMeter.widen`); one of unknown size counts its bytes as they come. Never more
      // than the whole budget: a download is not refused for its first share.
      memory = try await budget.reserve(
        min(reservation, budget.limit), priority: context.priority, source: true)
    } catch {
      limiter.release(slot)
      throw error
    }
    // While consumers want previews, a download is watched for the first bytes one can be
    // made from; they are handed to the thumbnail jobs listening while this job runs.
    let (previews, demand) = (previews, previewDemand)
    let watcher =
      demand.wanted
      ? PreviewWatcher { [turn = context.previews] bytes in
        guard demand.wanted else { return }
        turn.whileOpen { previews.publish(bytes, for: key) }
      } : nil
    defer {
      context.previews.close()
      previews.forget(key)
    }
    do {
      let started = ContinuousClock.now
      response = try await loader.load(
        SourceRequest(
          url: key.url, cached: conditional,
          meter: ByteMeter(
            room: memory.bytes,
            widen: { [memory, priority = context.priority] in
              try await memory.widen(to: $0, priority: priority)
            }, { [memory] in memory.count($0) }),
          watcher: watcher, parsed: parsed))
      metrics.observe("fetch", started.duration(to: .now).seconds)
      limiter.release(slot)
    } catch let error as FetchError {
      memory.release()
      limiter.release(slot)
      throw PipelineError.fetch(error)
    } catch {
      memory.release()
      limiter.release(slot)
      throw error
    }
    // From here the hold counts the body alone (nothing for a 304).
    memory.settle()
    switch response {
    case .notModified(let renewal):
      // The source cache's bytes are current: hand them on, renewed.
      memory.release()
      guard let cachedSource, conditional == cachedSource.version.validator else {
        return FetchedSource(response: response, memory: nil)
      }
      return FetchedSource(
        response: .modified(cachedSource.bytes, cachedSource.version.renewed(by: renewal)),
        memory: budget.hold(cachedSource.bytes.count))
    case .modified(let bytes, let version):
      metrics.countFetch(bytes: bytes.count)
      if let store = sourceDisk {
        if version.freshness.mayStore {
          await store.store(
            payload: bytes, metadata: ThumbnailDiskFormat.sourceMetadata(version),
            forKey: sourceKey)
        } else {
          await store.removeValue(forKey: sourceKey)
        }
      }
      return FetchedSource(response: response, memory: memory)
    }
  }

  private static func isFile(_ validator: SourceValidator) -> Bool {
    if case .file = validator { return true }
    return false
  }
}
