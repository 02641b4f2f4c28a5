import ImagePipeline
import Testing

@testable import TestSupport

extension DecodeSuites.Photos {
  /// Every EXIF orientation comes out upright.
  ///
  /// Each file of a set stores the same picture transformed its own way and was JPEG-encoded
  /// separately, so block artefacts differ between them; downsampling averages most of that away.
  /// Correctly oriented thumbnails of one set agree to well above 35 dB, while a mirrored or
  /// rotated one scores near 10-15 dB. 30 dB separates the two with a wide margin on both sides.
  @Suite("EXIF orientation", .serialized)
  struct OrientationTests {
    static let threshold = 30.0
    static let label = ImageMetrics.Exclusion(x: 0.40...0.60, y: 0.30...0.65)
    let thumbnailer = Thumbnailer()

    static let landscapes = (0...8).map { "exif-orientation/recurser/Landscape_\($0).jpg" }
    static let hoppers = (2...8).map { "exif-orientation/pillow/hopper_orientation_\($0).jpg" }

    private func upright(_ path: String, box: Int) throws -> Bitmap {
      let thumbnail = try thumbnailer.thumbnail(
        .path(Corpus.path(path)),
        spec: ValidSpec(ThumbnailSpec(width: box, height: box, format: .png)))
      return try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
    }

    @Test("Landscape_0...8 match Landscape_1", arguments: landscapes)
    func landscapeIsUpright(path: String) throws {
      let reference = try upright("exif-orientation/recurser/Landscape_1.jpg", box: 240)
      let image = try upright(path, box: 240)
      #expect(image.width == 240 && image.height == 160, "box applies to the displayed size")
      let psnr = ImageMetrics.psnr(reference, image, excluding: Self.label)
      #expect(psnr >= Self.threshold)
    }

    @Test("hopper orientations 2...8 all match one another", arguments: hoppers)
    func hopperIsUpright(path: String) throws {
      // No orientation-1 hopper exists in the set; all seven must agree, which a wrong
      // transform for any one orientation would break.
      let reference = try upright(Self.hoppers[0], box: 64)
      #expect(ImageMetrics.psnr(reference, try upright(path, box: 64)) >= Self.threshold)
    }

    @Test("a wrong orientation would be caught by the threshold")
    func thresholdDetectsRotation() throws {
      let upright = try self.upright("exif-orientation/recurser/Landscape_1.jpg", box: 240)
      var mirrored = upright
      for y in 0..<upright.height {
        for x in 0..<upright.width {
          for c in 0..<3 {
            mirrored.pixels[(y * upright.width + x) * 3 + c] =
              upright.pixels[(y * upright.width + upright.width - 1 - x) * 3 + c]
          }
        }
      }
      #expect(ImageMetrics.psnr(upright, mirrored, excluding: Self.label) < Self.threshold)
    }

    @Test("a 2x1 image with orientation 8 becomes 1x2")
    func tinyRotation() throws {
      let thumbnail = try thumbnailer.thumbnail(
        .path(Corpus.path("exif-orientation/pillow/orientation_rectangle.jpg")),
        spec: ValidSpec(ThumbnailSpec(width: 100, height: 100)))
      #expect(thumbnail.width == 1 && thumbnail.height == 2)
      #expect(thumbnail.orientation == 8)
    }
  }
}
