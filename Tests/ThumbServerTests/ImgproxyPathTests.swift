import ImagePipeline
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

  @Test("imgproxy's documented path: fill 300x400, smart gravity, Base64 source in pieces, png")
  func documented() throws {
    let request = try #require(
      try Self.parse(
        "/s/rs:fill:300:400:0/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png")?
        .get())
    #expect(request.source == "http://example.com/images/curiosity.jpg")
    #expect(request.width == 300 && request.height == 400 && request.fit == "cover")
    #expect(request.format == "png" && request.geometry.gravity == Gravity(.smart))
    #expect(request.enlarge == false)
  }

  @Test("geometry options read into one typed value, in any order")
  func geometry() throws {
    let request = try #require(
      try Self.parse(
        "/s/rs:fit:300:200:1:1:so/g:noea:5:6/c:0.5:100:fp:0.25:0.75/rot:-90/fl:1/pd:1:2:3"
          + "/bg:10:20:30/plain/http://a/b.jpg")?.get())
    var expected = Geometry()
    expected.gravity = Gravity(.northEast, offsetX: 5, offsetY: 6)
    (expected.cropWidth, expected.cropHeight) = (0.5, 100)
    expected.cropGravity = Gravity(.focus, focusX: 0.25, focusY: 0.75)
    expected.rotation = 270
    expected.flipHorizontal = true
    expected.extend = Gravity(.south)
    expected.padding = Padding(top: 1, right: 2, bottom: 3, left: 2)
    expected.background = RGBColour(red: 10, green: 20, blue: 30)
    #expect(request.geometry == expected && request.enlarge == true)
    let reordered = try #require(
      try Self.parse(
        "/s/bg:0a141e/pd:1:2:3:2/fl:t:f/rot:270/c:0.5:100:fp:0.25:0.75/g:noea:5:6/ex:1:so"
          + "/el:1/rs:fit:300:200/plain/http://a/b.jpg")?.get())
    #expect(reordered.options == request.options, "options that commute make the same value")
    #expect(try Self.parse("/s/rt:auto/plain/http://a/b.jpg")?.get().fit == "auto")
    #expect(try Self.parse("/s/ex:1/plain/http://a/b.jpg")?.get().geometry.extend == .centre)
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
      ("/s/wm:0.5:up/plain/http://a/b.jpg", "position"),
      ("/s/wmu:aHR0cA/plain/http://a/b.jpg", "'wmu'"),
      ("/s/bl:1e9/plain/http://a/b.jpg", "sigma"),
      ("/s/pix:0x/plain/http://a/b.jpg", "size"),
      ("/s/rs:smart:1:1/plain/http://a/b.jpg", "'smart'"),
      ("/s/rs:fit:1:1:2/plain/http://a/b.jpg", "boolean"),
      ("/s/g:up/plain/http://a/b.jpg", "gravity must be"),
      ("/s/g:fp:0.5/plain/http://a/b.jpg", "focus point"),
      ("/s/g:fp:nan:0.5/plain/http://a/b.jpg", "'nan'"),
      ("/s/g:fp:2:0.5/plain/http://a/b.jpg", "focus point"),
      ("/s/g:no:1e9:0/plain/http://a/b.jpg", "offsets"),
      ("/s/ex:1:sm/plain/http://a/b.jpg", "smart"),
      ("/s/c:1e9:1/plain/http://a/b.jpg", "not a size"),
      ("/s/rot:45/plain/http://a/b.jpg", "multiple of 90"),
      ("/s/pd:2147483648/plain/http://a/b.jpg", "not a padding"),
      ("/s/pd:1:2:3:4:5/plain/http://a/b.jpg", "1 to 4"),
      ("/s/bg:fff/plain/http://a/b.jpg", "hex"),
      ("/s/bg:1:2:256/plain/http://a/b.jpg", "'256'"),
      ("/s/ar:0/plain/http://a/b.jpg", "auto_rotate"),
      ("/s/exar:1/plain/http://a/b.jpg", "'exar'"),
      ("/s/" + String(repeating: "rot:90/", count: 10_000) + "plain/http://a/b.jpg", "at most 64"),
      ("/s/f:tiff/plain/http://a/b.jpg", "tiff"),
      ("/s/w:-1/plain/http://a/b.jpg", "'-1'"),
      ("/s/plain/http://a/b.jpg@bmp", "'bmp'"),
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
