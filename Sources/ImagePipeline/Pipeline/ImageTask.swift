import Synchronization

/// A consumer's handle on one request: await it, change its priority, or leave.
public final class ImageTask: Sendable {
  /// What was asked for.
  public let request: ImageRequest
  private let priorityBox: PriorityBox
  private let pipeline: ThumbnailPipeline
  private let task: Task<ImageResponse, any Error>

  init(
    request: ImageRequest, memoryChecked: Bool, priority: ImagePriority, client: ClientID,
    pipeline: ThumbnailPipeline, id: UInt64, onPreview: (@Sendable (Thumbnail) -> Void)? = nil,
    onFinish: (@Sendable (Result<ImageResponse, any Error>) -> Void)? = nil
  ) {
    let box = PriorityBox(priority)
    self.request = request
    self.priorityBox = box
    self.pipeline = pipeline
    if onPreview == nil && onFinish == nil {
      task = Task {
        try await pipeline.load(
          request, id: id, priority: box, client: client, memoryChecked: memoryChecked)
      }
      return
    }
    let gate: PreviewGate? = onPreview.map { PreviewGate($0) }
    var listener: Announcements<ImageRequest, Thumbnail>.Listener?
    if let gate { listener = { gate.offer($0) } }
    task = Task { [listener] in
      let result: Result<ImageResponse, any Error>
      do {
        let response = try await pipeline.load(
          request, id: id, priority: box, client: client, memoryChecked: memoryChecked,
          onPreview: listener)
        result = .success(response)
      } catch {
        result = .failure(error)
      }
      // No preview once the response is ready, and the preview's report before the outcome's.
      gate?.close()
      onFinish?(result)
      return try result.get()
    }
  }

  /// The current priority.
  public var priority: ImagePriority { priorityBox.value }

  /// Changes the priority; queued work is reordered and the upstream download follows.
  public func setPriority(_ priority: ImagePriority) {
    priorityBox.value = priority
    let (stage, request) = (pipeline.thumbnails, request)
    Task { await stage.priorityChanged(for: request) }
  }

  /// Leaves: this consumer gets `CancellationError`; the work stops only if nobody else wants it.
  public func cancel() { task.cancel() }

  /// The response, once it is ready.
  public var response: ImageResponse {
    get async throws { try await task.value }
  }
}

/// A consumer's previews: at most one, and none once its response is ready (the gate closes
/// before the response is handed out, and a preview is handed on under the same lock).
private final class PreviewGate: Sendable {
  private let state = Mutex<(shown: Bool, closed: Bool)>((false, false))
  private let onPreview: @Sendable (Thumbnail) -> Void

  init(_ onPreview: @escaping @Sendable (Thumbnail) -> Void) { self.onPreview = onPreview }

  func offer(_ preview: Thumbnail) {
    state.withLock { state in
      guard !state.shown, !state.closed else { return }
      state.shown = true
      onPreview(preview)
    }
  }

  func close() { state.withLock { $0.closed = true } }
}
