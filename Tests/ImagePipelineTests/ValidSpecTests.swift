import Testing

@testable import ImagePipeline
@testable import TestSupport

/// A spec is checked once, where a request is parsed (`ValidSpec`), and a request can only be
/// made from a checked one (`ImageRequest(url:spec:)` takes a `ValidSpec`, and its spec cannot
/// change after), so the pipeline never checks again.
@Suite("Checked specs")
struct ValidSpecTests {
  @Test("only a spec that passes validate() becomes a ValidSpec; its fields read through")
  func construction() throws {
    #expect(throws: ThumbnailError.self) { try ValidSpec(ThumbnailSpec(width: 0, height: 0)) }
    #expect(throws: ThumbnailError.self) { try ValidSpec(ThumbnailSpec(width: -4, height: 8)) }
    let valid = try ValidSpec(ThumbnailSpec(width: 64, height: 48, format: .png))
    #expect(valid.width == 64 && valid.height == 48 && valid.format == .png)
  }

  @Test("requests for the same URL spelling, spec and revision are one request: equal, same hash")
  func identity() throws {
    let spec = try ValidSpec(ThumbnailSpec(width: 64, height: 64))
    let first = ImageRequest(url: "https://o.example/a.jpg", spec: spec)
    let second = ImageRequest(url: "HTTPS://O.example:443/a.jpg#x", spec: spec)
    #expect(first == second)
    #expect(first.hashValue == second.hashValue)
    #expect(first.spec.width == 64)
    let other = ImageRequest(
      url: "https://o.example/a.jpg", spec: try ValidSpec(ThumbnailSpec(width: 32, height: 64)))
    #expect(first != other)
  }
}
