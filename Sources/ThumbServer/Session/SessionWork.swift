import ImagePipeline

/// Where a session's work runs: the seam between `SessionDriver` and the pipeline, so the
/// state machine can be driven against a scripted runner in tests.
protocol SessionWork: AnyObject {
  /// Starts `request`: its outcome when known at once (a memory hit); else nil, and the
  /// outcome comes back through the owner's `finished` call on the owner's own serial context
  /// (the event loop, a lock), after its preview (with `preview`) if one is made.
  func start(
    _ work: SessionState.WorkID, _ request: ImageRequest, _ priority: ImagePriority,
    _ purpose: SessionState.Purpose, preview: Bool
  ) -> SessionState.Outcome?
  /// `request`'s placeholder outcome when it is known at once; else nil, and the outcome
  /// comes later through the owner's `finished` if it is found at all.
  func placeholder(
    _ work: SessionState.WorkID, _ request: ImageRequest, _ purpose: SessionState.Purpose
  ) -> SessionState.Outcome?
  /// Gives up the work's subscription; a result may still come (shared work finishing).
  func cancel(_ work: SessionState.WorkID)
  /// Changes the work's priority.
  func setPriority(_ work: SessionState.WorkID, _ priority: ImagePriority)
  /// The work's outcome has been taken: forget it.
  func forget(_ work: SessionState.WorkID)
  /// A result for a binding that moved on was dropped.
  func countStaleDrop()
}

/// `SessionWork` over a `ThumbnailPipeline`: a memory hit answered at once, on the owner's
/// context; else one `ImageTask` per piece of work (kept for cancel and priority, and the one
/// task that reports), at the session's share of prefetch capacity. Used on one serial
/// context (the loop, a lock).
final class PipelineSessionWork: SessionWork {
  private let pipeline: ThumbnailPipeline
  private let client: ClientID
  private let report: @Sendable (FinishedWork) -> Void
  private var tasks: [SessionState.WorkID: ImageTask] = [:]
  /// When the last piece of work started: its placeholder, looked up next, shares the file
  /// check its memory lookup made instead of a `stat` of its own.
  private var lastStart: (work: SessionState.WorkID, at: ContinuousClock.Instant)?

  /// Work for `client` on `pipeline`; `report` hands each outcome back to the owner, from any
  /// thread (cancelled work reports nothing).
  init(
    pipeline: ThumbnailPipeline, client: ClientID,
    report: @escaping @Sendable (FinishedWork) -> Void
  ) {
    self.pipeline = pipeline
    self.client = client
    self.report = report
  }

  func start(
    _ work: SessionState.WorkID, _ request: ImageRequest, _ priority: ImagePriority,
    _ purpose: SessionState.Purpose, preview: Bool
  ) -> SessionState.Outcome? {
    let received = ContinuousClock.now
    lastStart = (work, received)
    let memoryMiss: MemoryMiss
    switch pipeline.lookup(request, priority: priority, client: client, received: received) {
    case .hit(let hit): return .success(hit)
    case .miss(let missed): memoryMiss = missed
    }
    let report = report
    // The pipeline hands the preview on before it closes the task's response, so its report
    // reaches the owner's serial context ahead of the outcome's.
    var onPreview: (@Sendable (Thumbnail) -> Void)?
    if preview {
      onPreview = { @Sendable thumbnail in
        report(FinishedWork(work: work, purpose: purpose, outcome: .preview(thumbnail)))
      }
    }
    tasks[work] = pipeline.task(
      after: memoryMiss, priority: priority, client: client, onPreview: onPreview
    ) { result in
      switch result {
      case .success(let response):
        report(FinishedWork(work: work, purpose: purpose, outcome: .success(response)))
      case .failure(let error as PipelineError):
        report(FinishedWork(work: work, purpose: purpose, outcome: .failure(error)))
      case .failure:
        break  // Cancelled: the state has already let go of it.
      }
    }
    return nil
  }

  func placeholder(
    _ work: SessionState.WorkID, _ request: ImageRequest, _ purpose: SessionState.Purpose
  ) -> SessionState.Outcome? {
    guard pipeline.makesPlaceholders else { return nil }
    let received = lastStart.flatMap { $0.work == work ? $0.at : nil } ?? .now
    if let known = pipeline.placeholder(for: request.url, rev: request.rev, received: received) {
      return Self.outcome(known, request)
    }
    guard pipeline.hasPlaceholderCache else { return nil }
    let pipeline = pipeline
    let report = report
    Task {
      let found = await PipelineSessionWork.storedOutcome(pipeline, request)
      guard let found else { return }
      report(FinishedWork(work: work, purpose: purpose, outcome: found))
    }
    return nil
  }

  /// The outcome for `request`'s placeholder from the disk, if one is stored.
  private static func storedOutcome(
    _ pipeline: ThumbnailPipeline, _ request: ImageRequest
  ) async -> SessionState.Outcome? {
    guard let stored = await pipeline.storedPlaceholder(for: request.url, rev: request.rev) else {
      return nil
    }
    return outcome(stored, request)
  }

  /// The outcome that sends `placeholder` for `request`'s load.
  static func outcome(_ placeholder: Placeholder, _ request: ImageRequest) -> SessionState.Outcome?
  {
    guard let size = placeholder.outputSize(for: request.spec.spec) else { return nil }
    return .placeholder(
      thumbHash: placeholder.thumbHash, colour: placeholder.colourHex, width: size.width,
      height: size.height)
  }

  func cancel(_ work: SessionState.WorkID) { tasks.removeValue(forKey: work)?.cancel() }

  func setPriority(_ work: SessionState.WorkID, _ priority: ImagePriority) {
    tasks[work]?.setPriority(priority)
  }

  func forget(_ work: SessionState.WorkID) { tasks[work] = nil }

  func countStaleDrop() { pipeline.metrics.countStaleDrop() }
}
