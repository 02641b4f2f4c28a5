import Testing

@testable import ImagePipeline
@testable import TestSupport

extension DecodeSuites.Formats {
  /// The HEIF decoder takes libheif's planar RGB and interleaves it row by row itself, and
  /// reduces 10- and 12-bit samples to 8 bits itself (libheif skips that without a conversion).
  /// Checked against libheif's own interleaved 8-bit conversion on every HEIC and AVIF of the
  /// corpus that decodes: a swapped or missing plane, a wrong stride or a wrong reduction is
  /// off by tens of levels; libheif truncates where thumbd rounds, which is one level apart
  /// before the colour transform and a few after it.
  @Suite("HEIF planes and HEVC decoders against libheif's own", .serialized)
  struct HEIFPlaneTests {
    static let files = Corpus.formatEntries(expected: "decode-ok").filter {
      $0.kind == "heif-valid"
    }

    @Test("planar rows match libheif's interleaved conversion", arguments: files)
    func planesMatchLibheif(entry: Corpus.Entry) throws {
      var libheif = Thumbnailer()
      libheif.heifPlanar = false
      let expected = try libheif.decodeFullResolution(.path(entry.url))
      let decoded = try Thumbnailer().decodeFullResolution(.path(entry.url))
      try #require(
        decoded.width == expected.width && decoded.height == expected.height
          && decoded.channels == expected.channels)
      let wide = entry.note.contains("10-bit") || entry.note.contains("12-bit")
      let (worst, mean) = ImageMetrics.sampleDifference(decoded, expected)
      // 8-bit files: the same samples, interleaved. Wider ones: rounding against truncation.
      #expect(wide ? worst <= 8 && mean <= 0.6 : worst == 0, "worst \(worst), mean \(mean)")
    }

    static let heics = files.filter { $0.path.lowercased().hasSuffix(".heic") }

    /// HEVC decoding is exact by specification: FFmpeg's decoder and libde265 give the same
    /// samples, so the pictures are the same to the byte (alpha planes, 10-bit, grids and
    /// cropped sizes among them). The same holds for what they refuse: a file one decoder
    /// rejects, the other must not show.
    @Test(
      "FFmpeg's HEVC decoder gives libde265's pixels",
      arguments: heics
        + Corpus.formatEntries(expected: "must-reject").filter {
          $0.kind == "heif-corrupt" && $0.path.lowercased().hasSuffix(".heic")
        })
    func ffmpegMatchesLibde265(entry: Corpus.Entry) throws {
      // scripts/bootstrap installs libavcodec: without it both sides would be libde265.
      #expect(Thumbnailer.hevcDecoder == "ffmpeg")
      var libde265 = Thumbnailer()
      libde265.hevcOnFFmpeg = false
      let expected = Result { () throws(ThumbnailError) in
        try libde265.decodeFullResolution(.path(entry.url))
      }
      let decoded = Result { () throws(ThumbnailError) in
        try Thumbnailer().decodeFullResolution(.path(entry.url))
      }
      switch (decoded, expected) {
      case (.success(let ours), .success(let theirs)):
        #expect(ours == theirs)
      case (.failure, .failure):
        #expect(entry.expected != "decode-ok")
      case (.success, .failure(let error)):
        Issue.record("FFmpeg decoded what libde265 refused: \(error.kind) \(error.message)")
      case (.failure(let error), .success):
        Issue.record("FFmpeg refused what libde265 decoded: \(error.kind) \(error.message)")
      }
    }
  }
}
