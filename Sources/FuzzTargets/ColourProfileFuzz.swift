import ImagePipeline

extension FuzzTarget {
  /// Colour profiles: the input is an ICC profile, carried by an RGB JPEG (split across APP2
  /// ICC_PROFILE chunks as JPEG writers do) through our chunk reassembly, lcms2's parser and
  /// linker, the transform cache, the bend check, and `keep`, which copies a profile lcms2
  /// accepted into JPEG output.
  static let colourProfile = FuzzTarget(
    name: "colour-profile",
    covers:
      "ICC profiles in JPEG APP2 chunks through lcms2, the transform cache and keep: a thumbnail with an outcome, never an error, crash or leak",
    maxLength: 65_536
  ) { profile in
    let thumbnailer = Thumbnailer()
    for (image, channels) in ColourFixtures.images {
      let tagged = ColourFixtures.tag(image, with: profile)
      for spec in [
        ThumbnailSpec(width: 8, height: 8, format: .png),
        ThumbnailSpec(width: 8, height: 8, format: .jpeg, colour: .keep),
      ] {
        do throws(ThumbnailError) {
          let thumbnail = try thumbnailer.thumbnail(.bytes(tagged), spec: ValidSpec(spec))
          require(thumbnail.width == 8 && thumbnail.height == 8, "wrong size")
          require(
            thumbnail.profile != .kept || spec.colour == .keep, "kept a profile without keep")
        } catch {
          require(false, "a \(channels)-channel image with a profile failed: \(error.kind)")
        }
      }
    }
  }
}

/// The fixed images the colour target tags.
enum ColourFixtures {
  /// A 16x16 RGB JPEG (encoded once), with its channel count.
  static let images: [([UInt8], Int)] = {
    var rgb = [UInt8](repeating: 0, count: 16 * 16 * 3)
    for i in 0..<(16 * 16) {
      rgb[i * 3] = UInt8(i & 0xFF)
      rgb[i * 3 + 1] = UInt8((i * 7) & 0xFF)
      rgb[i * 3 + 2] = UInt8(255 - (i & 0xFF))
    }
    let colour = try? ImageEncoder.jpeg(Bitmap(pixels: rgb, width: 16, height: 16, channels: 3))
    return [colour].compactMap { $0 }.map { ($0, 3) }
  }()

  /// The JPEG with `profile` in APP2 ICC_PROFILE chunks of at most 1000 bytes, after SOI.
  static func tag(_ jpeg: [UInt8], with profile: [UInt8]) -> [UInt8] {
    let chunkSize = 1000
    let count = max(1, (profile.count + chunkSize - 1) / chunkSize)
    guard count <= 255 else { return jpeg }
    var out: [UInt8] = [0xFF, 0xD8]
    for index in 0..<count {
      let part = profile[
        min(
          profile.count, index * chunkSize)..<min(
            profile.count, (index + 1) * chunkSize)]
      let length = 2 + 14 + part.count
      out += [0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)]
      out += Array("ICC_PROFILE".utf8) + [0, UInt8(index + 1), UInt8(count)]
      out += part
    }
    return out + jpeg[2...]
  }
}
