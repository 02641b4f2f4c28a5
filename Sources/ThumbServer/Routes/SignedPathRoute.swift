import ImagePipeline
import Synchronization

/// The imgproxy path form (`ImgproxyPath`) at the root of the listeners. With signing keys
/// configured, the signature is checked against the target as received, before the source or
/// options are read, any cache is asked or any work starts: a wrong one is 403
/// `invalid_signature`, counted for `/metrics`. Without keys, any signature segment is
/// accepted (imgproxy's `insecure`), as the query form is.
public struct SignedPathRoute: Sendable {
  /// Serves what a path asks for, as `/v1/thumbnail` would.
  public let thumbnails: ThumbnailRoute
  /// The keys, when requests must be signed.
  public let signing: URLSignature?
  /// What the path form's targets start with ("" for the root); the signature covers the
  /// rest.
  public let prefix: String
  private let invalid = Counter()
  /// The request headers its answers read: a thumbnail's (`Route.reads`).
  var reads: Set<String> { ThumbnailRoute.reads }

  /// Refused signatures so far.
  public var invalidSignatures: Int { invalid.value }

  final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
  }

  /// A route serving through `thumbnails` under `prefix`, checking signatures with `signing`
  /// when given.
  public init(thumbnails: ThumbnailRoute, signing: URLSignature?, prefix: String = "") {
    self.thumbnails = thumbnails
    self.signing = signing
    self.prefix = prefix
  }

  /// The answer for a target in the path form; nil for any other target (a 404 then).
  func answer(_ request: HTTPRequest) -> RouteAnswer? {
    var target = request.target[...]
    if !prefix.isEmpty {
      guard target.hasPrefix(prefix), target.dropFirst(prefix.utf8.count).hasPrefix("/") else {
        return nil
      }
      target = target.dropFirst(prefix.utf8.count)
    }
    guard
      let path = ImgproxyPath(
        target: String(target), presetsOnly: thumbnails.parameters.presets.only)
    else { return nil }
    if let signing, !signing.verify(signature: path.signature, path: path.signed) {
      invalid.add()
      return .now(
        .error(403, kind: "invalid_signature", message: "the signature does not match"), nil)
    }
    guard request.method == "GET" || request.method == "HEAD" else {
      var response = HTTPResponse.error(405, kind: "method_not_allowed", message: "use GET, HEAD")
      response.headers.append(("Allow", "GET, HEAD"))
      return .now(response, nil)
    }
    let asked: ImgproxyPath.Request
    switch path.parse(presets: thumbnails.parameters.presets) {
    case .success(let parsed): asked = parsed
    case .failure(let error):
      return .now(.error(400, kind: "bad_request", message: error.message), nil)
    }
    switch thumbnails.parameters.spec(asked.options, of: request) {
    case .failure(let error):
      return .now(.error(400, kind: "bad_request", message: error.message), nil)
    case .success(let (spec, varies)):
      return thumbnails.answer(
        request, for: ImageRequest(url: asked.source, spec: spec), priority: .visible,
        varies: varies)
    }
  }
}

/// `path_prefix`'s rule: "" or `/segment[/segment...]` of unreserved characters, no trailing
/// slash, so it compares byte for byte with a request target.
enum PathPrefix {
  static func isValid(_ text: String) -> Bool {
    text.hasPrefix("/") && !text.hasSuffix("/") && !text.contains("//") && text.utf8.count <= 256
      && text.utf8.allSatisfy { byte in
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
          || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
          || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
          || "/-._~".utf8.contains(byte)
      }
  }
}
