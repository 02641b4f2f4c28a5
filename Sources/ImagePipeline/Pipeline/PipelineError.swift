/// Why the pipeline could not produce an image. Cancellation is not an error: a consumer that
/// leaves gets `CancellationError`.
public enum PipelineError: Error, Sendable, Hashable {
  /// Decoding, resizing or encoding failed.
  case thumbnail(ThumbnailError)
  /// The source could not be fetched.
  case fetch(FetchError)
  /// The decode queue is full; try again later.
  case queueFull

  /// A stable snake_case name for logs, metrics and protocol errors.
  public var kind: String {
    switch self {
    case .thumbnail(let error): error.kind
    case .fetch(let error): error.kind
    case .queueFull: "queue_full"
    }
  }

  /// A human-readable explanation.
  public var message: String {
    switch self {
    case .thumbnail(let error): error.message
    case .fetch(let error): error.message
    case .queueFull: "the decode queue is full"
    }
  }
}
