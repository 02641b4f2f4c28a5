import CImageCodecs
import Foundation
import Synchronization
import Testing

@testable import ImagePipeline
@testable import TestSupport

extension DecodeSuites.Photos {
  /// Embedded profiles to sRGB: against a full-resolution conversion, with broken, oversized
  /// and odd profiles, CMYK, `keep`, and the transform cache.
  @Suite("Colour profiles", .serialized)
  struct ColourTests {
    let thumbnailer = Thumbnailer()

    static let profiled = Corpus.formatEntries.filter {
      $0.kind == "icc" && $0.expected == "decode-ok"
    }

    /// The thumbnail at 256 and a reference: the full decode converted at full resolution,
    /// then an exact area average to the thumbnail's size.
    func difference(_ path: String, spec: ThumbnailSpec) throws -> (mean: Double, p99: Double) {
      let thumbnail = try thumbnailer.thumbnail(.path(path), spec: ValidSpec(spec))
      let shown = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
      let full = try thumbnailer.decodeFullResolution(.path(path))
      let reference = ImageMetrics.areaAverage(full, width: shown.width, height: shown.height)
      return ColourDifference.ciede2000(reference, shown)
    }

    @Test(
      "every profiled image is within CIEDE2000 mean 2, p99 5, of a full-size conversion",
      arguments: profiled)
    func matchesFullResolutionConversion(entry: Corpus.Entry) throws {
      let spec = ThumbnailSpec(width: 256, height: 256, format: .png)
      let (mean, p99) = try difference(entry.url, spec: spec)
      #expect(mean <= 2, "\(entry.path): mean \(mean)")
      #expect(p99 <= 5, "\(entry.path): p99 \(p99)")
    }

    @Test("a wide-gamut profile changes the pixels: converting is not a no-op")
    func conversionChangesWideGamutPixels() throws {
      let path = Corpus.path("icc/danbooru/countergirl-prophoto.jpg")
      let converted = try thumbnailer.thumbnail(
        .path(path), spec: ValidSpec(ThumbnailSpec(width: 256, height: 256, format: .png)))
      #expect(converted.profile == .converted)
      let kept = try thumbnailer.thumbnail(
        .path(path),
        spec: ValidSpec(ThumbnailSpec(width: 256, height: 256, format: .png, colour: .keep)))
      #expect(kept.profile == .kept)
      // Decoded without its profile (the raw samples), kept differs clearly from converted.
      let raw = try PNGChunks.stripped(kept.data, chunk: "iCCP")
      let a = try thumbnailer.decodeFullResolution(.bytes(converted.data))
      let b = try thumbnailer.decodeFullResolution(.bytes(raw))
      #expect(ColourDifference.ciede2000(a, b).mean > 3)
    }

    @Test(
      "keep copies the profile into every output format; read back, it shows the srgb result",
      arguments: [OutputFormat.png, .jpeg, .webp, .avif])
    func keepCarriesTheProfile(format: OutputFormat) throws {
      let path = Corpus.path("icc/sdwebimage/SDWebImageHighLevelDiagram.jpeg")
      let kept = try thumbnailer.thumbnail(
        .path(path),
        spec: ValidSpec(
          ThumbnailSpec(width: 256, height: 256, format: format, quality: 95, colour: .keep)))
      #expect(kept.profile == .kept)
      let marker: [UInt8] =
        switch format {
        case .png: Array("iCCP".utf8)
        case .jpeg: Array("ICC_PROFILE".utf8)
        case .webp: Array("ICCP".utf8)
        default: Array("prof".utf8)
        }
      #expect(kept.data.firstRange(of: marker) != nil)
      let srgb = try thumbnailer.thumbnail(
        .path(path), spec: ValidSpec(ThumbnailSpec(width: 256, height: 256, format: .png)))
      #expect(srgb.data.firstRange(of: Array("iCCP".utf8)) == nil, "srgb output is untagged")
      // The kept file read back through its own profile shows what the srgb one shows.
      let roundTrip = try thumbnailer.decodeFullResolution(.bytes(kept.data))
      let direct = try thumbnailer.decodeFullResolution(.bytes(srgb.data))
      let (mean, _) = ColourDifference.ciede2000(direct, roundTrip)
      #expect(mean < 1.5, "\(format): mean \(mean)")
    }

    @Test("a broken profile is ignored: a thumbnail, outcome broken, the pixels as sRGB")
    func brokenProfilesAreIgnored() throws {
      let original = try Corpus.bytes("icc/danbooru/countergirl-p3.jpg")
      let offset = try #require(original.firstRange(of: Array("ICC_PROFILE\0".utf8))).lowerBound
      let untagged = try thumbnailer.thumbnail(
        .bytes(try JPEGSegments.stripped(original, marker: 0xE2)),
        spec: ValidSpec(ThumbnailSpec(width: 256, height: 256, format: .png)))
      #expect(untagged.profile == .none)
      // Sequence 0, a count saying a second chunk follows, the profile's own signature gone.
      var badSequence = original
      badSequence[offset + 12] = 0
      var missingChunk = original
      missingChunk[offset + 13] = 2
      var unreadable = original
      let signature = try #require(original.firstRange(of: Array("acsp".utf8))).lowerBound
      unreadable[signature] = UInt8(ascii: "x")
      for bytes in [badSequence, missingChunk, unreadable] {
        let thumbnail = try thumbnailer.thumbnail(
          .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 256, height: 256, format: .png)))
        #expect(thumbnail.profile == .broken)
        #expect(thumbnail.data == untagged.data)
      }
      let empty = try thumbnailer.thumbnail(
        .path(Corpus.path("icc/serenity/gradient_empty_icc.jpg")),
        spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)))
      #expect(empty.profile == .broken)
    }

    @Test(
      "a profile over max_profile_bytes is ignored as oversized, in JPEG, PNG and WebP",
      arguments: [
        "icc/danbooru/countergirl-p3.jpg", "icc/serenity/icc-v2.png",
        "icc/metadata-extractor/HTC_Desire.webp",
      ])
    func oversizedProfilesAreIgnored(path: String) throws {
      var limited = Thumbnailer()
      limited.limits.maxProfileBytes = 500
      let spec = ThumbnailSpec(width: 64, height: 64, format: .png)
      let thumbnail = try limited.thumbnail(.path(Corpus.path(path)), spec: ValidSpec(spec))
      #expect(thumbnail.profile == .oversized)
      #expect(
        try thumbnailer.thumbnail(.path(Corpus.path(path)), spec: ValidSpec(spec)).profile
          != .oversized)
    }

    @Test("a profile libpng drops (CMYK profile on an RGB PNG) counts as broken")
    func droppedPNGProfileIsBroken() throws {
      let thumbnail = try thumbnailer.thumbnail(
        .path(Corpus.path("icc/imagetestsuite/0839d93f8e77e21acd0ac40a80b14b7b.png")),
        spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)))
      #expect(thumbnail.profile == .broken)
    }

    @Test("CMYK and YCCK JPEGs go through their own profile, or the standard one without")
    func cmykUsesItsProfile() throws {
      let spec = ThumbnailSpec(width: 64, height: 64, format: .png)
      for path in ["icc/sharp/icc-cmyk.jpg", "icc/serenity/buggie-cmyk.jpg"] {
        #expect(
          try thumbnailer.thumbnail(.path(Corpus.path(path)), spec: ValidSpec(spec)).profile
            == .converted, "\(path)")
      }
      let untagged = Corpus.path("jpeg-valid/sharp/Channel_digital_image_CMYK_color_no_profile.jpg")
      let standard = try thumbnailer.thumbnail(.path(untagged), spec: ValidSpec(spec))
      #expect(standard.profile == .standardCMYK)
      // The standard profile is not the formula: a press profile's black is not 0,0,0.
      #expect(ColourManagement.useStandardCMYKProfile(contentsOf: nil) == false)
      let formula = try thumbnailer.thumbnail(.path(untagged), spec: ValidSpec(spec))
      #expect(
        ColourManagement.useStandardCMYKProfile(
          contentsOf: ColourManagement.defaultCMYKProfilePath))
      #expect(formula.data != standard.data)
    }

    @Test("PNG: sRGB and gAMA 1/2.2 are sRGB as they stand; a linear gAMA is converted")
    func pngChunksDescribeColour() throws {
      let spec = ThumbnailSpec(width: 32, height: 32, format: .png)
      let srgb = try thumbnailer.thumbnail(
        .path(Corpus.path("png-valid/libpng-testpngs/gray-8-sRGB.png")), spec: ValidSpec(spec))
      #expect(srgb.profile == .none)
      let linear = try thumbnailer.thumbnail(
        .path(Corpus.path("png-valid/libpng-testpngs/gray-8-linear.png")), spec: ValidSpec(spec))
      #expect(linear.profile == .converted)
      let plain = try thumbnailer.thumbnail(
        .path(Corpus.path("png-valid/libpng-testpngs/gray-8.png")), spec: ValidSpec(spec))
      #expect(plain.profile == .none)
      #expect(linear.data != plain.data)
    }

    @Test("a profile is parsed and linked once: the next decode with it uses the cache")
    func transformsAreCached() throws {
      // A profile no other test uses: one byte of its copyright text changed.
      var bytes = try Corpus.bytes("icc/danbooru/countergirl-adobergb.jpg")
      let text = try #require(bytes.firstRange(of: Array("Copyright".utf8))).lowerBound
      bytes[text] = UInt8(ascii: "K")
      let spec = ThumbnailSpec(width: 32, height: 32, format: .png)
      let first = try thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
      #expect(first.profile == .converted)
      #expect(!first.profileTransformCached)
      for size in [16, 24, 32] {
        let next = try thumbnailer.thumbnail(
          .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: size, height: size, format: .png)))
        #expect(next.profileTransformCached)
      }
    }

    @Test(
      "curve-and-matrix tables give lcms2's pixels to within one level, on every profiled image",
      arguments: profiled)
    func tablesMatchLCMS2(entry: Corpus.Entry) throws {
      let spec = ThumbnailSpec(width: 256, height: 256, format: .png)
      let fast = try thumbnailer.thumbnail(.path(entry.url), spec: ValidSpec(spec))
      let slow = try ColourManagement.withoutTables {
        try thumbnailer.thumbnail(.path(entry.url), spec: ValidSpec(spec))
      }
      let a = try thumbnailer.decodeFullResolution(.bytes(fast.data))
      let b = try thumbnailer.decodeFullResolution(.bytes(slow.data))
      #expect(a.width == b.width && a.height == b.height)
      let worst = ImageMetrics.sampleDifference(a, b).worst
      #expect(worst <= 1, "\(entry.path): \(worst) levels")
    }

    @Test(
      "wide-gamut camera profiles run as tables; the test suite's stepped profile does not",
      arguments: [
        ("icc/danbooru/countergirl-p3.jpg", true), ("icc/danbooru/countergirl-adobergb.jpg", true),
        ("icc/danbooru/countergirl-prophoto.jpg", true),
        ("icc/sdwebimage/TestICCProfile.jpg", false),
      ])
    func tablesWhereTheyFit(path: String, tables: Bool) throws {
      // A copy of the profile with its creation date changed, so it is built now.
      var bytes = try Corpus.bytes(path)
      let segment = try #require(bytes.firstRange(of: Array("ICC_PROFILE\0".utf8))).lowerBound
      bytes[segment + 14 + 24] ^= 0x5A
      let before = ColourManagement.stats()
      let thumbnail = try thumbnailer.thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64, format: .png)))
      #expect(thumbnail.profile == .converted)
      #expect(!thumbnail.profileTransformCached)
      let after = ColourManagement.stats()
      if tables {
        #expect(after.tables > before.tables)
      } else {
        // Other suites may build transforms meanwhile: only a lone build here proves it.
        if after.builds == before.builds + 1 { #expect(after.tables == before.tables) }
      }
    }

    @Test("a short element chain links; a long one is refused before lcms2 links it")
    func elementChains() throws {
      let pixels = [UInt8](repeating: 100, count: 16 * 16 * 3)
      let png = try ImageEncoder.png(Bitmap(pixels: pixels, width: 16, height: 16, channels: 3))
      let spec = ThumbnailSpec(width: 8, height: 8, format: .png)
      let short = try ICCFixtures.png(
        png, profile: ICCFixtures.rgbProfile(floatTag: ICCFixtures.chainedMatrices(3)))
      #expect(try thumbnailer.thumbnail(.bytes(short), spec: ValidSpec(spec)).profile == .converted)
      let segments = try ICCFixtures.png(
        png, profile: ICCFixtures.rgbProfile(floatTag: ICCFixtures.segmentedCurves(4)))
      #expect(
        try thumbnailer.thumbnail(.bytes(segments), spec: ValidSpec(spec)).profile == .converted)
      let long = try ICCFixtures.png(
        png, profile: ICCFixtures.rgbProfile(floatTag: ICCFixtures.chainedMatrices(50_000)))
      #expect(try thumbnailer.thumbnail(.bytes(long), spec: ValidSpec(spec)).profile == .unlinkable)
    }

    /// A build held at the gate stands for a slow first-time link (lcms2 spent 51 s on one
    /// profile, uninterruptibly): a decode whose transform is cached must not wait for it.
    @Test("a first-time transform build does not delay a decode that needs a cached transform")
    func buildDoesNotBlockCachedDecodes() async throws {
      let cached = try Corpus.bytes("icc/danbooru/countergirl-p3.jpg")
      // A profile nothing else uses, so that its decode builds.
      var building = try Corpus.bytes("icc/danbooru/countergirl-adobergb.jpg")
      let text = try #require(building.firstRange(of: Array("Copyright".utf8))).lowerBound
      building[text] = UInt8(ascii: "Q")
      building[text + 1] = UInt8(ascii: "!")
      let spec = ThumbnailSpec(width: 32, height: 32, format: .png)
      _ = try thumbnailer.thumbnail(.bytes(cached), spec: ValidSpec(spec))
      BuildGate.install()
      defer { BuildGate.remove() }
      let thumbnailer = thumbnailer
      let toBuild = building
      let held = StartedThread {
        BuildGate.mark()
        return try thumbnailer.thumbnail(.bytes(toBuild), spec: ValidSpec(spec))
      }
      #expect(await BuildGate.entered(within: .seconds(30)), "the build never reached the gate")
      // The build is held: a decode needing the cached transform goes on, off the pool so a
      // lock it waits on cannot stall the test's own threads.
      let other = try await StartedThread {
        try thumbnailer.thumbnail(.bytes(cached), spec: ValidSpec(spec))
      }.value(within: .seconds(20))
      #expect(other?.profileTransformCached == true, "the cached decode waited for the build")
      BuildGate.release()
      #expect(try await held.value.profile == .converted)
    }

    @Test("the transform cache stays bounded however many profiles pass through")
    func cacheIsBounded() throws {
      var bytes = try Corpus.bytes("icc/danbooru/countergirl-p3.jpg")
      let text = try #require(bytes.firstRange(of: Array("Copyright".utf8))).lowerBound
      let spec = ThumbnailSpec(width: 16, height: 16, format: .png)
      for variant in 0..<40 {
        bytes[text] = UInt8(variant + 65)
        bytes[text + 1] = UInt8(ascii: "#")
        _ = try thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
      }
      let stats = ColourManagement.stats()
      #expect(stats.entries <= 32)
      #expect(stats.bytes <= 48 << 20)
    }
  }
}

/// Holds a colour transform build at lcms2's door (`ic_colour_set_build_gate`): only builds on
/// a thread marked with `mark()`, so other suites' builds pass through.
enum BuildGate {
  static let enteredSignal = DispatchSemaphore(value: 0)
  static let releaseSignal = DispatchSemaphore(value: 0)
  static let key = "thumbd.test.build-gate"

  static func install() {
    ic_colour_set_build_gate {
      guard Thread.current.threadDictionary[BuildGate.key] != nil else { return }
      BuildGate.enteredSignal.signal()
      BuildGate.releaseSignal.wait()
    }
  }

  /// Marks the calling thread: its builds stop at the gate.
  static func mark() { Thread.current.threadDictionary[key] = true }

  static func entered(within limit: Duration) async -> Bool {
    let seconds = Double(limit.components.seconds)
    return (try? await offPool { enteredSignal.wait(timeout: .now() + seconds) == .success })
      ?? false
  }

  static func release() { releaseSignal.signal() }

  static func remove() { ic_colour_set_build_gate(nil) }
}
