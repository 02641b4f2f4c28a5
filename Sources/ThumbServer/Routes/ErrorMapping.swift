import ImagePipeline

/// How pipeline failures become HTTP statuses: the contract in docs/PROTOCOL.md.
enum ErrorMapping {
  /// The status and JSON error for a failure, plus `Retry-After` seconds when the caller should
  /// come back later.
  static func response(for error: PipelineError) -> HTTPResponse {
    var response = HTTPResponse.error(status(for: error), kind: error.kind, message: error.message)
    if error == .queueFull { response.headers.append(("Retry-After", "1")) }
    return response
  }

  static func status(for error: PipelineError) -> Int {
    switch error {
    case .queueFull:
      return 503
    case .overBudget:
      return 413
    case .fetch(let fetch):
      switch fetch {
      case .notAllowed: return 403
      case .httpStatus(let code): return code == 404 || code == 410 ? 404 : 502
      case .tooLarge: return 413
      case .timedOut: return 504
      case .invalidURL: return 400
      case .io: return 404
      case .tooManyRedirects, .transport, .badResponse: return 502
      }
    case .thumbnail(let thumbnail):
      switch thumbnail {
      case .invalidSpec: return 400
      case .tooLarge: return 413
      case .unsupportedFormat, .corrupt, .truncated: return 415
      case .outOfMemory: return 503
      case .timedOut, .tooComplex: return 422
      case .cancelled, .io, .encodingFailed: return 500
      }
    }
  }
}
