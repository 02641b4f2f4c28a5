import Testing

@testable import ImagePipeline
@testable import TestSupport

/// A spec is checked once, where a request is parsed (`ValidSpec`), and the check travels with
/// the request into the pipeline; changing the spec afterwards drops it.
@Suite("Checked specs")
struct ValidSpecTests {
  @Test("only a spec that passes validate() becomes a ValidSpec; its fields read through")
  func construction() throws {
    #expect(throws: ThumbnailError.self) { try ValidSpec(ThumbnailSpec(width: 0, height: 0)) }
    #expect(throws: ThumbnailError.self) { try ValidSpec(ThumbnailSpec(width: -4, height: 8)) }
    let valid = try ValidSpec(ThumbnailSpec(width: 64, height: 48, format: .png))
    #expect(valid.width == 64 && valid.height == 48 && valid.format == .png)
  }

  @Test("a checked request is the same request as an unchecked one: equal, same hash")
  func identity() throws {
    let spec = ThumbnailSpec(width: 64, height: 64)
    let checked = ImageRequest(url: "https://o.example/a.jpg", spec: try ValidSpec(spec))
    let plain = ImageRequest(url: "https://o.example/a.jpg", spec: spec)
    #expect(checked == plain)
    #expect(checked.hashValue == plain.hashValue)
    #expect(try checked.validSpec() == ValidSpec(spec))
  }

  @Test("a spec changed after the check is checked again: an invalid one is refused")
  func changedSpecIsCheckedAgain() async throws {
    let pipeline = ThumbnailPipeline(
      configuration: .init(dataLoader: CountingLoader(["https://o.example/a.jpg": []])))
    var request = ImageRequest(
      url: "https://o.example/a.jpg", spec: try ValidSpec(ThumbnailSpec(width: 64, height: 64)))
    request.spec.width = -1
    #expect(throws: ThumbnailError.self) { try request.validSpec() }
    do {
      _ = try await pipeline.response(for: request)
      Issue.record("an invalid spec was accepted")
    } catch PipelineError.thumbnail(.invalidSpec) {
    } catch {
      Issue.record("not invalidSpec: \(error)")
    }
  }
}
