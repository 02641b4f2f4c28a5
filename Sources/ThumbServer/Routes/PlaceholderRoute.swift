import ImagePipeline
import ThumbProtocol

/// `GET /v1/placeholder?url=&rev=[&w=&h=&scale=&fit=]`: a source's placeholder as JSON,
/// `{"thumbhash":BASE64,"colour":"#rrggbb","width":W,"height":H}`, the size being the
/// source's (upright) or, with a box, the thumbnail's that box would give. Answered from the
/// placeholder index (memory, then disk); when neither knows the source, made from the
/// cheapest picture of it the pipeline can give (a 32-pixel thumbnail: a JPEG's DC, a HEIF's
/// embedded thumbnail), which also leaves the placeholder indexed. Held to the query form's
/// rules: unsigned, so refused over TCP when signing keys are set; a miss is charged to the
/// client's bucket.
public struct PlaceholderRoute: Sendable {
  /// The thumbnail route whose pipeline, parameters and limits this one shares.
  public let thumbnails: ThumbnailRoute

  /// A route over `thumbnails`' pipeline.
  public init(thumbnails: ThumbnailRoute) { self.thumbnails = thumbnails }

  /// The route for `/v1/placeholder`.
  public var route: Route {
    Route(path: "/v1/placeholder", reads: ThumbnailRoute.clientReads) { [self] request in
      answer(request)
    }
  }

  /// The spec of the picture a missing placeholder is made from (32x32 PNG: valid by sight).
  static let previewSpec = try! ValidSpec(ThumbnailSpec(width: 32, height: 32, format: .png))

  func answer(_ request: HTTPRequest) -> RouteAnswer {
    if request.overNetwork && thumbnails.refusesUnsignedOverNetwork {
      return .now(ThumbnailRoute.unsignedRefusal, nil)
    }
    let pipeline = thumbnails.pipeline
    guard pipeline.makesPlaceholders else {
      return .now(
        .error(404, kind: "not_found", message: "placeholders are off (placeholders)"), nil)
    }
    guard let url = request.queryValue("url"), !url.isEmpty else {
      return .now(.error(400, kind: "bad_request", message: "the url parameter is required"), nil)
    }
    let rev = request.queryValue("rev")
    if let rev, rev.isEmpty || rev.utf8.count > Wire.maxRevisionLength {
      return .now(
        .error(
          400, kind: "bad_request", message: "rev must be 1 to \(Wire.maxRevisionLength) bytes"),
        nil)
    }
    var box: ThumbnailSpec?
    if request.queryValue("w") != nil || request.queryValue("h") != nil {
      var options = ImageOptions()
      options.width = request.queryValue("w").flatMap { Int($0) } ?? 0
      options.height = request.queryValue("h").flatMap { Int($0) } ?? 0
      options.scale = request.queryValue("scale").flatMap { Double($0) }
      options.fit = request.queryValue("fit")
      switch thumbnails.parameters.spec(options) {
      case .success(let spec): box = spec.spec
      case .failure(let error):
        return .now(.error(400, kind: "bad_request", message: error.message), nil)
      }
    }
    let received = request.received ?? .now
    if let known = pipeline.placeholder(for: url, rev: rev, received: received) {
      return .now(Self.response(known, box), nil)
    }
    let address = thumbnails.address(of: request)
    if let refusal = thumbnails.missRefusal(from: address) { return .now(refusal, nil) }
    let client = thumbnails.client(of: request, priority: .visible, address: address)
    let sizedFor = box
    return .later {
      if let stored = await pipeline.storedPlaceholder(for: url, rev: rev, received: received) {
        return (Self.response(stored, sizedFor), nil)
      }
      do {
        let made = try await pipeline.response(
          for: ImageRequest(url: url, spec: Self.previewSpec, rev: rev), priority: .visible,
          client: client)
        // A preview from a cache carries none: made from its (small) bytes then, and kept.
        guard
          let placeholder = pipeline.keepPlaceholder(decoding: made.thumbnail, url: url, rev: rev)
        else {
          return (.error(415, kind: "corrupt", message: "the preview does not decode"), nil)
        }
        return (Self.response(placeholder, sizedFor), made.source)
      } catch let error as PipelineError {
        return (ErrorMapping.response(for: error), nil)
      } catch {
        return (.error(499, kind: "cancelled", message: "client went away"), nil)
      }
    }
  }

  /// The JSON answer for `placeholder`, sized for `box` when given.
  static func response(_ placeholder: Placeholder, _ box: ThumbnailSpec?) -> HTTPResponse {
    let size = box.flatMap { placeholder.outputSize(for: $0) } ?? placeholder.uprightSize
    let body =
      "{\"thumbhash\":\(JSONValue.quote(Base64.standard(placeholder.thumbHash))),"
      + "\"colour\":\"\(placeholder.colourHex)\",\"width\":\(size.width),"
      + "\"height\":\(size.height)}\n"
    return HTTPResponse(
      status: 200,
      headers: [("Content-Type", "application/json"), ("Cache-Control", "no-cache")],
      body: Array(body.utf8))
  }
}
