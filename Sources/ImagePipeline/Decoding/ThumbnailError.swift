/// Why a thumbnail could not be made. Every decoder failure maps to one of these.
public enum ThumbnailError: Error, Sendable, Hashable {
  /// The bytes are in no format a decoder is registered for (judged by magic bytes, never by
  /// name).
  case unsupportedFormat(String)
  /// The decoder rejected the data.
  case corrupt(String)
  /// The data ends before the image does.
  case truncated(String)
  /// The source is over a limit: its header declares more pixels (or a longer side) than the
  /// limits allow, or it has more bytes than the source limit. `width` and `height` are the
  /// declared size (0 when the limit was on bytes); `message` names the limit passed.
  case tooLarge(width: Int, height: Int, message: String)
  /// The work was cancelled before it finished.
  case cancelled
  /// An allocation failed or the decoder's memory budget ran out.
  case outOfMemory(String)
  /// The source could not be read.
  case io(String)
  /// The request itself is invalid.
  case invalidSpec(String)
  /// Encoding the result failed.
  case encodingFailed(String)
  /// The decode passed its deadline (`DecodingLimits.decodeTimeout`).
  case timedOut(String)
  /// The image would cost more work than the limits allow (a JPEG with too many scans).
  case tooComplex(String)

  /// A stable snake_case name, used by the CLI, logs and the daemon's JSON errors.
  public var kind: String {
    switch self {
    case .unsupportedFormat: "unsupported_format"
    case .corrupt: "corrupt"
    case .truncated: "truncated"
    case .tooLarge: "too_large"
    case .cancelled: "cancelled"
    case .outOfMemory: "out_of_memory"
    case .io: "io"
    case .invalidSpec: "invalid_spec"
    case .encodingFailed: "encoding_failed"
    case .timedOut: "decode_timeout"
    case .tooComplex: "too_complex"
    }
  }

  /// A human-readable explanation.
  public var message: String {
    switch self {
    case .unsupportedFormat(let m), .corrupt(let m), .truncated(let m), .outOfMemory(let m),
      .io(let m), .invalidSpec(let m), .encodingFailed(let m), .timedOut(let m),
      .tooComplex(let m), .tooLarge(_, _, let m):
      m
    case .cancelled: "the work was cancelled before it finished"
    }
  }
}

extension ThumbnailError: CustomStringConvertible {
  /// `kind: message`, as printed by the CLI.
  public var description: String { "\(kind): \(message)" }
}
