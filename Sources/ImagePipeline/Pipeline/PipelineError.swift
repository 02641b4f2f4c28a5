/// Why the pipeline could not produce an image. Cancellation is not an error: a consumer that
/// leaves gets `CancellationError`.
public enum PipelineError: Error, Sendable, Hashable {
  /// Decoding, resizing or encoding failed.
  case thumbnail(ThumbnailError)
  /// The source could not be fetched.
  case fetch(FetchError)
  /// The decode queue is full; try again later.
  case queueFull
  /// The job alone needs more memory than the whole budget (`memory_budget`), so it could
  /// never start: the bytes it needs (a decode's estimate) and the limit.
  case overBudget(needed: Int, limit: Int)

  /// A stable snake_case name for logs, metrics and protocol errors.
  public var kind: String {
    switch self {
    case .thumbnail(let error): error.kind
    case .fetch(let error): error.kind
    case .queueFull: "queue_full"
    case .overBudget: "too_large"
    }
  }

  /// A human-readable explanation.
  public var message: String {
    switch self {
    case .thumbnail(let error): error.message
    case .fetch(let error): error.message
    case .queueFull: "the decode queue is full"
    case .overBudget(let needed, let limit):
      "the image needs \(Self.mebibytes(needed)) to decode, more than the whole memory budget (\(Self.mebibytes(limit)))"
    }
  }

  private static func mebibytes(_ bytes: Int) -> String {
    let tenths = (bytes * 10 + (1 << 19)) >> 20
    return "\(tenths / 10).\(tenths % 10) MiB"
  }
}

extension PipelineError: CustomStringConvertible {
  /// The message (a log line or an error body never shows the case's name).
  public var description: String { message }
}
