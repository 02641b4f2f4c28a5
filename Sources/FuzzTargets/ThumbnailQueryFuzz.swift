import ImagePipeline
import ThumbServer

extension FuzzTarget {
  /// The `/v1/thumbnail` query: parameters in any combination and encoding.
  static let thumbnailQuery = FuzzTarget(
    name: "thumbnail-query",
    covers:
      "the /v1/thumbnail query: a request line made of the input parses to a valid spec (validated box, scale and quality) or a 400, never a crash or an out-of-range size",
    maxLength: 8192
  ) { bytes in
    let head = Array("GET /v1/thumbnail?".utf8) + bytes + Array(" HTTP/1.1\r\nHost: f\r\n\r\n".utf8)
    var parser = HTTPRequestParser()
    guard let request = (try? parser.feed(head))?.first else { return }
    switch ServerFuzzing.thumbnailRequest(request) {
    case .success(let (image, _)):
      require((try? image.spec.spec.validate()) != nil, "an invalid spec passed")
      require(!image.url.isEmpty, "empty url passed")
      require(
        image.spec.pixelWidth >= 0 && image.spec.pixelHeight >= 0
          && image.spec.pixelWidth <= ThumbnailSpec.maxPixelSide
          && image.spec.pixelHeight <= ThumbnailSpec.maxPixelSide,
        "box \(image.spec.pixelWidth)x\(image.spec.pixelHeight)")
    case .failure(let refusal):
      require(refusal.status == 400, "status \(refusal.status)")
    }
  }
}
