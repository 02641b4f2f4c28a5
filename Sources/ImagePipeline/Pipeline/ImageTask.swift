/// A consumer's handle on one request: await it, change its priority, or leave.
public final class ImageTask: Sendable {
  /// What was asked for.
  public let request: ImageRequest
  private let priorityBox: PriorityBox
  private let pipeline: ThumbnailPipeline
  private let task: Task<ImageResponse, any Error>

  init(
    request: ImageRequest, priority: ImagePriority, client: ClientID,
    pipeline: ThumbnailPipeline, id: UInt64
  ) {
    let box = PriorityBox(priority)
    self.request = request
    self.priorityBox = box
    self.pipeline = pipeline
    task = Task { try await pipeline.load(request, id: id, priority: box, client: client) }
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
