import ImagePipeline
import Testing

@testable import TestSupport

/// Fit modes, device scale, upscaling and the box semantics.
@Suite("Geometry")
struct GeometryTests {
  let thumbnailer = Thumbnailer()
  /// 1800x1200 stored, orientation 1.
  let landscape = Corpus.path("exif-orientation/recurser/Landscape_1.jpg")
  /// 1200x1800 stored, orientation 6: displayed 1800x1200.
  let rotated = Corpus.path("exif-orientation/recurser/Landscape_6.jpg")

  private func size(
    _ path: String, _ spec: ThumbnailSpec, using thumbnailer: Thumbnailer = Thumbnailer()
  ) throws -> [Int] {
    let t = try thumbnailer.thumbnail(.path(path), spec: ValidSpec(spec))
    return [t.width, t.height]
  }

  @Test("contain keeps the aspect ratio inside the box")
  func contain() throws {
    #expect(try size(landscape, ThumbnailSpec(width: 300, height: 300)) == [300, 200])
    #expect(try size(landscape, ThumbnailSpec(width: 300, height: 100)) == [150, 100])
    #expect(try size(rotated, ThumbnailSpec(width: 300, height: 300)) == [300, 200])
  }

  @Test("cover fills the box with a centre crop")
  func cover() throws {
    #expect(try size(landscape, ThumbnailSpec(width: 200, height: 200, fit: .cover)) == [200, 200])
    #expect(try size(rotated, ThumbnailSpec(width: 100, height: 300, fit: .cover)) == [100, 300])
  }

  @Test("cover crops the centre, not an edge")
  func coverCropsCentre() throws {
    // Left half red, right half blue, 200x100: a 100x100 cover must be half of each.
    var pixels: [UInt8] = []
    for _ in 0..<100 {
      for x in 0..<200 { pixels += x < 100 ? [255, 0, 0] : [0, 0, 255] }
    }
    let png = try ImageEncoder.png(Bitmap(pixels: pixels, width: 200, height: 100, channels: 3))
    let t = try thumbnailer.thumbnail(
      .bytes(png), spec: ValidSpec(ThumbnailSpec(width: 50, height: 50, fit: .cover, format: .png)))
    let image = try thumbnailer.decodeFullResolution(.bytes(t.data))
    #expect(image.width == 50 && image.height == 50)
    #expect(image.pixels[(25 * 50 + 2) * 3] > 200, "left edge is red")
    #expect(image.pixels[(25 * 50 + 47) * 3 + 2] > 200, "right edge is blue")
  }

  @Test("fill stretches to the box")
  func fill() throws {
    #expect(try size(landscape, ThumbnailSpec(width: 100, height: 300, fit: .fill)) == [100, 300])
  }

  @Test("scale multiplies the box")
  func deviceScale() throws {
    #expect(try size(landscape, ThumbnailSpec(width: 150, height: 150, scale: 2)) == [300, 200])
    #expect(try size(landscape, ThumbnailSpec(width: 100, height: 100, scale: 1.5)) == [150, 100])
  }

  @Test("no upscaling unless asked")
  func upscaling() throws {
    let small = Corpus.path("exif-orientation/pillow/hopper_orientation_2.jpg")  // 128x128
    #expect(try size(small, ThumbnailSpec(width: 512, height: 512)) == [128, 128])
    #expect(
      try size(small, ThumbnailSpec(width: 512, height: 512, allowUpscale: true)) == [512, 512])
    #expect(try size(small, ThumbnailSpec(width: 512, height: 256, fit: .cover)) == [128, 128])
  }

  @Test("one open side bounds only the other")
  func openSide() throws {
    #expect(try size(landscape, ThumbnailSpec(width: 0, height: 100)) == [150, 100])
    #expect(try size(landscape, ThumbnailSpec(width: 90, height: 0)) == [90, 60])
  }

  @Test("shrink-on-load and full decode agree on geometry")
  func shrinkOnLoadGeometry() throws {
    let photo = Corpus.path("photo/coil/large.jpg")
    let spec = ThumbnailSpec(width: 256, height: 256, fit: .cover)
    #expect(
      try size(photo, spec) == size(photo, spec, using: Thumbnailer(shrinkOnLoad: false)))
  }

  @Test(
    "invalid specs are refused before decoding",
    arguments: [
      ThumbnailSpec(width: 0, height: 0), ThumbnailSpec(width: -1, height: 10),
      ThumbnailSpec(width: 10, height: 10, scale: 0),
      ThumbnailSpec(width: 10, height: 10, scale: .nan),
      ThumbnailSpec(width: 10, height: 10, quality: 0),
      ThumbnailSpec(width: 10, height: 10, quality: 101),
      ThumbnailSpec(width: 20_000, height: 10),
      ThumbnailSpec(width: 10, height: 4_777_777_777_777_777_772, scale: 2),
      ThumbnailSpec(width: .max, height: .max, scale: 8),
    ])
  func invalidSpec(spec: ThumbnailSpec) throws {
    #expect {
      _ = try thumbnailer.thumbnail(.path(landscape), spec: ValidSpec(spec))
    } throws: { error in
      (error as? ThumbnailError)?.kind == "invalid_spec"
    }
  }
}
