/// Why a source could not be fetched.
public enum FetchError: Error, Sendable, Hashable {
  /// The URL's scheme, host or address is not allowed by the source policy.
  case notAllowed(String)
  /// The origin answered with a non-2xx status.
  case httpStatus(Int)
  /// The body is larger than the configured cap.
  case tooLarge(limit: Int)
  /// A connect or total deadline passed.
  case timedOut(String)
  /// Too many redirects.
  case tooManyRedirects(Int)
  /// A file could not be read, or a `file://` path is not a regular file inside a root.
  case io(String)
  /// The transfer failed (connection reset, DNS failure, ...).
  case transport(String)
  /// The URL is malformed or unsupported.
  case invalidURL(String)
  /// The origin's response broke HTTP (a malformed head, conflicting lengths).
  case badResponse(String)

  /// A stable snake_case name.
  public var kind: String {
    switch self {
    case .notAllowed: "not_allowed"
    case .httpStatus: "http_status"
    case .tooLarge: "source_too_large"
    case .timedOut: "timeout"
    case .tooManyRedirects: "too_many_redirects"
    case .io: "io"
    case .transport: "transport"
    case .invalidURL: "invalid_url"
    case .badResponse: "bad_response"
    }
  }

  /// A human-readable explanation.
  public var message: String {
    switch self {
    case .notAllowed(let m), .timedOut(let m), .io(let m), .transport(let m), .invalidURL(let m),
      .badResponse(let m):
      m
    case .httpStatus(let code): "the origin answered HTTP \(code)"
    case .tooLarge(let limit): "the source is larger than \(limit) bytes"
    case .tooManyRedirects(let count): "more than \(count) redirects"
    }
  }
}

extension FetchError: CustomStringConvertible {
  /// The message (a log line or an error body never shows the case's name).
  public var description: String { message }
}
