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
  private let invalid = Counter()

  /// Refused signatures so far.
  public var invalidSignatures: Int { invalid.value }

  final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
  }

  /// A route serving through `thumbnails`, checking signatures with `signing` when given.
  public init(thumbnails: ThumbnailRoute, signing: URLSignature?) {
    self.thumbnails = thumbnails
    self.signing = signing
  }

  /// The answer for a target in the path form; nil for any other target (a 404 then).
  func answer(_ request: HTTPRequest) -> RouteAnswer? {
    guard let path = ImgproxyPath(target: request.target) else { return nil }
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
    switch path.parse() {
    case .success(let parsed): asked = parsed
    case .failure(let error):
      return .now(.error(400, kind: "bad_request", message: error.message), nil)
    }
    let negotiated = thumbnails.parameters.negotiates(format: asked.format)
    var parameters = thumbnails.parameters
    if negotiated { parameters.accepted = AcceptedFormats(acceptOf: request) }
    switch parameters.spec(
      width: asked.width, height: asked.height, scale: asked.scale, fit: asked.fit,
      format: asked.format, quality: asked.quality)
    {
    case .failure(let error):
      return .now(.error(400, kind: "bad_request", message: error.message), nil)
    case .success(let spec):
      return thumbnails.answer(
        request, for: ImageRequest(url: asked.source, spec: spec), priority: .visible,
        negotiated: negotiated)
    }
  }
}
