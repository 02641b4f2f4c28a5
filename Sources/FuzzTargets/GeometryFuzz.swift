import ImagePipeline
import ThumbServer

extension FuzzTarget {
  /// Geometry options run: the input is a path's options, read as the daemon reads them, and
  /// a small picture with alpha is made with them.
  static let geometry = FuzzTarget(
    name: "geometry",
    covers:
      "geometry options (gravity, smart crop, crop, rotation, mirroring, extend, padding, background) read from a path and run on a picture with alpha: a thumbnail of the size its placeholder announces and within the limits, or a typed refusal; no crash, leak or out-of-bounds access",
    maxLength: 1024
  ) { bytes in
    let options = String(decoding: bytes, as: UTF8.self)
    guard let (_, _, asked) = ServerFuzzing.imgproxyPath("/s/\(options)/plain/x"),
      case .success(let (asSpec, _)) = asked
    else { return }
    var spec = asSpec
    spec.format = .png
    var thumbnailer = Thumbnailer()
    thumbnailer.limits.maxPixels = 1 << 22
    thumbnailer.limits.decodeTimeout = 0
    thumbnailer.makesPlaceholders = true
    let made: Thumbnail
    do throws(ThumbnailError) {
      made = try thumbnailer.thumbnail(.bytes(geometrySource), spec: ValidSpec(spec))
    } catch {
      switch error {
      case .invalidSpec, .tooLarge: break
      default: require(false, "an error other than a refusal: \(error)")
      }
      return
    }
    require(made.width * made.height <= 1 << 22, "\(made.width)x\(made.height) past the limit")
    // A trim's size is known only from the pixels: its announcement is the untrimmed one's.
    guard spec.geometry.trim == nil else { return }
    let announced = made.placeholder?.outputSize(for: spec)
    require(
      announced.map { $0.width == made.width && $0.height == made.height } == true,
      "announced \(String(describing: announced)), made \(made.width)x\(made.height)")
  }
}

/// 61x47, a gradient with a transparent corner and a skin-toned patch.
private let geometrySource: [UInt8] = {
  var pixels: [UInt8] = []
  for y in 0..<47 {
    for x in 0..<61 {
      let skin = (40..<55).contains(x) && (10..<30).contains(y)
      pixels +=
        skin ? [224, 172, 140, 255] : [UInt8(x * 4), UInt8(y * 5), 90, x + y < 20 ? 0 : 255]
    }
  }
  return try! ImageEncoder.png(Bitmap(pixels: pixels, width: 61, height: 47, channels: 4))
}()
