import Loopback

/// Where a run's source images come from: thumbload's own synthetic origin, or any server
/// holding images made by `thumbload generate` (nginx serving a directory, say).
public protocol ImageOrigin: Sendable {
  /// The URL of item `n`.
  func url(item: Int) -> String
  /// Requests per path so far, if this origin can tell.
  var requests: [String: Int]? { get }
  /// Body bytes sent per path so far, if this origin can tell.
  var bytesSent: [String: Int]? { get }
  /// Makes these items ready to serve without delay, if the origin makes its images on demand.
  func prepare(items: [Int])
  /// When items change, if they do (`--mutate`).
  var mutations: Mutations? { get }
  /// The `max-age` the origin sends with every image, if it sends one.
  var maxAge: Int? { get }
  /// The last few bodies sent per path, first byte to last, if this origin can tell.
  var transfers: [String: [OriginTransfer]]? { get }
}

/// One body an origin sent: when its first byte went out and when its last did.
public typealias OriginTransfer = LoopbackOrigin.Transfer

extension ImageOrigin {
  /// Nothing to prepare.
  public func prepare(items: [Int]) {}
  /// Items that never change.
  public var mutations: Mutations? { nil }
  /// No freshness sent.
  public var maxAge: Int? { nil }
  /// Not timed.
  public var transfers: [String: [OriginTransfer]]? { nil }
}

/// An origin thumbload does not run: URLs from a template with `{item}` in it. It cannot count
/// fetches; the report's origin figures are then absent.
public struct ExternalOrigin: ImageOrigin {
  /// For example `http://127.0.0.1:8080/items/{item}.jpg`.
  public let template: String

  /// An origin from a URL template.
  public init(template: String) { self.template = template }

  /// The template with `{item}` replaced.
  public func url(item: Int) -> String {
    template.replacingOccurrences(of: "{item}", with: String(item))
  }

  /// Unknown.
  public var requests: [String: Int]? { nil }
  /// Unknown.
  public var bytesSent: [String: Int]? { nil }
}
