import Testing
import ThumbProtocol
import ThumbSystem

@testable import ThumbServer

/// imgproxy's path form read into thumbd's parameters: what maps, and what is refused naming
/// the option.
@Suite("imgproxy paths")
struct ImgproxyPathTests {
  static func parse(_ target: String) -> Result<ImgproxyPath.Request, ParameterError>? {
    ImgproxyPath(target: target)?.parse()
  }

  @Test("signature and signed part: the part after the first segment, from its slash")
  func split() throws {
    let path = try #require(ImgproxyPath(target: "/sig/rs:fit:1:2/plain/x"))
    #expect(path.signature == "sig" && path.signed == "/rs:fit:1:2/plain/x")
    #expect(ImgproxyPath(target: "//rs:fit/plain/x") == nil, "an empty signature")
    #expect(ImgproxyPath(target: "/healthz") == nil)
    #expect(ImgproxyPath(target: "/nope/1") == nil, "no option and no plain source: a 404")
    #expect(ImgproxyPath(target: "/sig/plain/x")?.signed == "/plain/x")
  }

  @Test(
    "imgproxy's documented path: fill 300x400, centre-ish gravity refused, Base64 source in pieces, png"
  )
  func documented() throws {
    // g:sm (smart gravity) is not something thumbd does: refused by name.
    let smart = Self.parse(
      "/s/rs:fill:300:400:0/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png")
    guard case .failure(let error)? = smart else {
      Issue.record("g:sm was accepted")
      return
    }
    #expect(error.message.contains("gravity"))
    let request = try #require(
      try Self.parse(
        "/s/rs:fill:300:400:0/g:ce/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png")?
        .get())
    #expect(request.source == "http://example.com/images/curiosity.jpg")
    #expect(request.width == 300 && request.height == 400 && request.fit == "cover")
    #expect(request.format == "png")
  }

  @Test(
    "options map onto thumbd's",
    arguments: [
      ("/s/rs:fit:200:100/plain/http%3A%2F%2Fa%2Fb.jpg", 200, 100, "contain", nil, nil, nil),
      ("/s/resize:force:10:20/plain/http://a/b.jpg@webp", 10, 20, "fill", "webp", nil, nil),
      ("/s/rt:fill-down/s:50:60/q:70/dpr:2/plain/http://a/b.jpg", 50, 60, "cover", nil, 70, 2.0),
      ("/s/w:300/h:0/f:jpg/ex:0/el:0/plain/http://a/b.jpg", 300, 0, nil, "jpeg", nil, nil),
      (
        "/s/width:8/height:9/format:avif/quality:0/plain/http://a/b.jpg", 8, 9, nil, "avif", nil,
        nil
      ),
    ] as [(String, Int, Int, String?, String?, Int?, Double?)])
  func mapped(
    target: String, width: Int, height: Int, fit: String?, format: String?, quality: Int?,
    scale: Double?
  ) throws {
    let request = try #require(try Self.parse(target)?.get())
    #expect(request.width == width && request.height == height && request.fit == fit)
    #expect(request.format == format && request.quality == quality && request.scale == scale)
    #expect(request.source == "http://a/b.jpg")
  }

  @Test(
    "what thumbd does not do is refused, naming it",
    arguments: [
      ("/s/bl:5/plain/http://a/b.jpg", "'bl'"),
      ("/s/rs:auto:1:1/plain/http://a/b.jpg", "'auto'"),
      ("/s/rs:fit:1:1:1/plain/http://a/b.jpg", "enlarge"),
      ("/s/s:1:1:0:1/plain/http://a/b.jpg", "extend"),
      ("/s/ex:true/plain/http://a/b.jpg", "extend"),
      ("/s/g:no/plain/http://a/b.jpg", "gravity"),
      ("/s/f:tiff/plain/http://a/b.jpg", "tiff"),
      ("/s/w:-1/plain/http://a/b.jpg", "'-1'"),
      ("/s/plain/http://a/b.jpg@gif", "'gif'"),
      ("/s/pr:thumb/plain/http://a/b.jpg", "preset 'thumb' is not defined"),
      ("/s/rs:fit:1:1", "missing"),
      ("/s/rs:fit:1:1/plain/%zz", "percent"),
      ("/s/rs:fit:1:1/a$b", "Base64"),
    ])
  func refused(target: String, naming: String) throws {
    let result = try #require(Self.parse(target))
    guard case .failure(let error) = result else {
      Issue.record("\(target) was accepted")
      return
    }
    #expect(error.message.contains(naming), "\(error.message)")
  }

  @Test("URL-safe Base64 decodes what it encodes, padded or not, and refuses other characters")
  func base64() {
    for length in 0..<40 {
      let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
      let encoded = Base64.urlSafe(bytes)
      #expect(Base64.decodeURLSafe(encoded) == bytes)
      let padding = String(repeating: "=", count: (4 - encoded.count % 4) % 4)
      #expect(Base64.decodeURLSafe(encoded + padding) == bytes)
    }
    #expect(Base64.decodeURLSafe("ab+c") == nil && Base64.decodeURLSafe("abcde") == nil)
  }
}
