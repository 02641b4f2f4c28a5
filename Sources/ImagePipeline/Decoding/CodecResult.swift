import CImageCodecs

/// Reading `ic_result` values coming back from C.
enum CodecResult {
  /// The NUL-terminated message buffer as a String, on one line: libraries' messages (libheif's)
  /// can hold line breaks and other control characters, and every failure is one line in the
  /// CLI's output and the logs.
  static func message(of result: inout ic_result) -> String {
    withUnsafeBytes(of: &result.message) { raw in
      String(
        decoding: raw.prefix { $0 != 0 }.map { $0 < 0x20 || $0 == 0x7F ? 0x20 : $0 }, as: UTF8.self)
    }
  }

  /// The typed error a failed result stands for.
  static func error(of result: inout ic_result) -> ThumbnailError {
    let message = message(of: &result)
    switch result.status {
    case IC_ERR_UNSUPPORTED: return .unsupportedFormat(message)
    case IC_ERR_TRUNCATED: return .truncated(message)
    case IC_ERR_TOO_LARGE:
      return .tooLarge(
        width: Int(result.source_width), height: Int(result.source_height), message: message)
    case IC_ERR_CANCELLED: return .cancelled
    case IC_ERR_NO_MEMORY: return .outOfMemory(message)
    case IC_ERR_IO: return .io(message)
    case IC_ERR_INVALID_ARGUMENT: return .invalidSpec(message)
    case IC_ERR_ENCODE: return .encodingFailed(message)
    case IC_ERR_TIMEOUT: return .timedOut(message)
    case IC_ERR_TOO_COMPLEX: return .tooComplex(message)
    default: return .corrupt(message)
    }
  }
}
