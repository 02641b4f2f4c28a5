import ThumbSystem

/// The desktop's thumbnail work inside a pipeline: one job per file and flavor however many
/// callers want it (the pipeline's coalescing stage and its reference counts), run by a
/// `DesktopThumbnailer` on the pipeline's decode threads at the most urgent caller's priority.
///
/// A caller that stops waiting (its task cancelled) leaves at once; the job goes on while
/// another caller wants it, and is stopped (its decoder's flag raised) when the last one leaves.
/// A job waits for its decode's estimate in `memory_budget` (at most the whole budget) before
/// it takes a decode thread.
package final class DesktopJobs: Sendable {
  struct Key: Hashable, Sendable {
    let path: String
    let flavor: FreedesktopCache.Flavor
  }

  /// Writes the entries.
  package let thumbnailer: DesktopThumbnailer
  /// Makes the thumbnails of the types thumbd does not decode, when there is one.
  package let delegate: (any DesktopDelegate)?
  private let pipeline: ThumbnailPipeline
  private let stage: CoalescingStage<Key, DesktopThumbnailer.Outcome>

  /// Jobs that share `pipeline`'s decode threads and metrics, handing the types thumbd does
  /// not decode to `delegate`.
  package init(
    pipeline: ThumbnailPipeline, thumbnailer: DesktopThumbnailer,
    delegate: (any DesktopDelegate)? = nil
  ) {
    self.pipeline = pipeline
    self.thumbnailer = thumbnailer
    self.delegate = delegate
    let metrics = pipeline.metrics
    stage = CoalescingStage(
      onJoin: { metrics.countJoin() }, onWorkCancelled: { metrics.countCancelledWork() })
  }

  /// Thumbnails the file at `path` (absolute, said to be `mediaType`) in `flavor`, or joins
  /// the job already doing it.
  /// Throws `CancellationError` when the calling task is cancelled (it stops waiting at once),
  /// and `PipelineError.queueFull` when the decode queue has no room at this priority.
  package func thumbnail(
    path: String, flavor: FreedesktopCache.Flavor, priority: ImagePriority,
    mediaType: String? = nil
  ) async throws -> DesktopThumbnailer.Outcome {
    let key = Key(path: path, flavor: flavor)
    let delivery = try await stage.value(
      for: key, subscriber: pipeline.nextID(), priority: PriorityBox(priority)
    ) { [pipeline, thumbnailer, delegate] key, context in
      // A type thumbd does not decode goes to the delegate, unless the file's content is in
      // a format thumbd does decode (a misnamed file).
      if let delegate, let mediaType, delegate.handles(mediaType),
        let outcome = await delegate.thumbnail(
          path: key.path, flavors: [key.flavor], mediaType: mediaType, maker: thumbnailer)
      {
        if case .refused(let kind, _) = outcome, kind == ThumbnailError.cancelled.kind {
          throw CancellationError()
        }
        return outcome
      }
      // What the decode will hold, from the file's header, waits for its share of
      // memory_budget as the pipeline's own decodes do (ThumbnailJob). The header is read on
      // a thread of its own: a slow disk must not hold one of the few pool threads. A file
      // within the pixel and byte limits is never refused for its size here (the desktop
      // refuses by those limits): one whose estimate exceeds the whole budget waits for all
      // of it and runs alone. A 3840x2160 AVIF with alpha estimates 258.6 MiB.
      let estimate = await SystemThread.run(name: "thumbd-estimate") {
        thumbnailer.estimate(path: key.path, flavor: key.flavor)
      }
      let budget = pipeline.budget
      context.onPriorityChange { budget.reconsider() }
      let memory = try await budget.reserve(
        min(estimate, budget.limit), priority: context.priority, unblocks: true)
      defer { memory.release() }
      // Counted once, though a prefetch job raised while it runs is run again.
      let native = try await pipeline.decoders.run(
        context: context, started: { pipeline.metrics.countDesktopJob() }
      ) { cancellation in
        // Counted with the pipeline's other decodes (thumbd_colour_profiles_total).
        let outcome = thumbnailer.thumbnail(
          path: key.path, flavors: [key.flavor], cancellation: cancellation,
          decoded: { pipeline.metrics.countProfile($0) })
        if case .refused(let kind, _) = outcome, kind == ThumbnailError.cancelled.kind {
          throw CancellationError()
        }
        return outcome
      }
      memory.release()  // a fallback holds none of it (safe to release twice)
      // A file thumbd reads but has nothing to show of (a camera RAW without a preview) goes
      // to the installed entry for its type, if there is one.
      if case .refused(let kind, _) = native, kind == ThumbnailError.unsupportedFormat("").kind,
        let delegate, let mediaType,
        let outcome = await delegate.fallback(
          path: key.path, flavors: [key.flavor], mediaType: mediaType, maker: thumbnailer)
      {
        if case .refused(let kind, _) = outcome, kind == ThumbnailError.cancelled.kind {
          throw CancellationError()
        }
        return outcome
      }
      return native
    }
    return delivery.value
  }
}

/// Makes the desktop's thumbnails of the types thumbd does not decode, elsewhere: an
/// installed thumbnailer in a sandbox (ThumbServer's `DesktopDelegation`).
package protocol DesktopDelegate: Sendable {
  /// The MIME types it can make thumbnails of.
  var mediaTypes: [String] { get }
  /// Whether it can make thumbnails of `mediaType`.
  func handles(_ mediaType: String) -> Bool
  /// The outcome for the file at `path`, said to be `mediaType`, in `flavors`, through
  /// `maker`'s checks and writer; nil when its content is in a format thumbd decodes itself.
  /// Stops (with a cancelled refusal) when the calling task is cancelled.
  func thumbnail(
    path: String, flavors: Set<FreedesktopCache.Flavor>, mediaType: String,
    maker: DesktopThumbnailer
  ) async -> DesktopThumbnailer.Outcome?
  /// The outcome of the installed entry for `mediaType` on a file thumbd reads but has nothing
  /// to show of (a camera RAW without an embedded preview); nil when no entry makes the type.
  func fallback(
    path: String, flavors: Set<FreedesktopCache.Flavor>, mediaType: String,
    maker: DesktopThumbnailer
  ) async -> DesktopThumbnailer.Outcome?
}
