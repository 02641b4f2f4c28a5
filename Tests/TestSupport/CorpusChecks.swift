import ImagePipeline
import Testing

/// The checks every corpus manifest's suite makes on its files, in one place.
enum CorpusChecks {
  /// A decode-ok file's thumbnail in a `box` x `box` box: the upright size the manifest
  /// implies, real bytes of the format it claims, which decode to that size. Returns it.
  @discardableResult
  static func expectUprightThumbnail(
    _ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int
  ) throws -> Thumbnail {
    let thumbnail = try thumbnailer.thumbnail(
      .bytes(Corpus.bytes(entry.path)), spec: ValidSpec(ThumbnailSpec(width: box, height: box)))
    let shown = try #require(entry.displayedSize, "manifest has no dimensions")
    let expected = ImageMetrics.containSize(width: shown.width, height: shown.height, box: box)
    #expect(thumbnail.width == expected.width && thumbnail.height == expected.height)
    #expect(ImageFormat.sniff(thumbnail.data) == thumbnail.format)
    let decoded = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
    #expect(decoded.width == expected.width && decoded.height == expected.height)
    return thumbnail
  }

  /// A decode-ok file's upright thumbnail, the same from memory and streamed from its file.
  static func expectDecodes(_ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int) throws {
    let thumbnail = try expectUprightThumbnail(entry, thumbnailer: thumbnailer, box: box)
    let fromFile = try thumbnailer.thumbnail(
      .path(entry.url), spec: ValidSpec(ThumbnailSpec(width: box, height: box)))
    #expect(fromFile == thumbnail)
  }

  /// An `either` file decodes inside the box or fails with a typed error, from memory and
  /// streamed from its file.
  static func expectHandled(_ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int) throws {
    let bytes = try Corpus.bytes(entry.path)
    let spec = ThumbnailSpec(width: box, height: box)
    for fromFile in [false, true] {
      do throws(ThumbnailError) {
        let thumbnail =
          fromFile
          ? try thumbnailer.thumbnail(.path(entry.url), spec: ValidSpec(spec))
          : try thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
        #expect(thumbnail.width > 0 && thumbnail.width <= box)
        #expect(thumbnail.height > 0 && thumbnail.height <= box)
      } catch {
        #expect(!error.kind.isEmpty)
      }
    }
  }

  /// A must-reject file gives a typed error, from memory and streamed from its file.
  static func expectRejected(_ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int) {
    let spec = ThumbnailSpec(width: box, height: box)
    #expect(throws: ThumbnailError.self) {
      _ = try thumbnailer.thumbnail(.bytes(Corpus.bytes(entry.path)), spec: ValidSpec(spec))
    }
    #expect(throws: ThumbnailError.self) {
      _ = try thumbnailer.thumbnail(.path(entry.url), spec: ValidSpec(spec))
    }
  }

  /// The PSNR of a file's default 256x256 thumbnail against an exact area average of its
  /// full-resolution decode; transparent pixels compared as shown, over grey.
  static func psnrAgainstAreaAverage(_ path: String) throws -> Double {
    let thumbnailer = Thumbnailer()
    let fast = try thumbnailer.thumbnail(
      .path(Corpus.path(path)),
      spec: ValidSpec(ThumbnailSpec(width: 256, height: 256, format: .png)))
    let full = try thumbnailer.decodeFullResolution(.path(Corpus.path(path)))
    let reference = ImageMetrics.areaAverage(full, width: fast.width, height: fast.height)
    return ImageMetrics.psnr(
      ImageMetrics.flattened(try thumbnailer.decodeFullResolution(.bytes(fast.data))),
      ImageMetrics.flattened(reference))
  }
}
