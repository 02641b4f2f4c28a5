import ImagePipeline
import Testing

/// The checks every corpus manifest's suite makes on its files, in one place.
enum CorpusChecks {
  /// A thumbnailer for decode-ok files, whose decodes must succeed: under the whole suite on
  /// two cores, a large one (an AV1 grid of 20 tiles, in a debug build) has passed the default
  /// 10 s decode deadline. The deadline is tested where it is the subject (and the `either`
  /// and must-reject files keep it: a decoder's own bounds are what they test).
  static let patient = Thumbnailer(limits: DecodingLimits(decodeTimeout: 120))

  /// A decode-ok file's thumbnail in a `box` x `box` box: the upright size the manifest
  /// implies, real bytes of the format it claims, which decode to that size. Returns it.
  @discardableResult
  static func expectUprightThumbnail(
    _ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int
  ) throws -> Thumbnail {
    let thumbnail = try thumbnailer.thumbnail(
      .bytes(Corpus.bytes(entry.path)), spec: ValidSpec(ThumbnailSpec(width: box, height: box)))
    try expectUpright(thumbnail, entry, box: box)
    return thumbnail
  }

  /// `thumbnail` (of a decode-ok file, in a `box` x `box` box) has the upright size the
  /// manifest implies, and is real bytes of the format it claims, which decode to that size.
  static func expectUpright(_ thumbnail: Thumbnail, _ entry: Corpus.Entry, box: Int) throws {
    let shown = try #require(entry.displayedSize, "manifest has no dimensions")
    let expected = ImageMetrics.containSize(width: shown.width, height: shown.height, box: box)
    #expect(thumbnail.width == expected.width && thumbnail.height == expected.height)
    #expect(ImageFormat.sniff(thumbnail.data) == thumbnail.format)
    let decoded = try Thumbnailer().decodeFullResolution(.bytes(thumbnail.data))
    #expect(decoded.width == expected.width && decoded.height == expected.height)
  }

  /// A decode-ok file's upright thumbnail, the same from memory and streamed from its file.
  static func expectDecodes(_ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int) throws {
    let thumbnail = try expectUprightThumbnail(entry, thumbnailer: thumbnailer, box: box)
    let fromFile = try thumbnailer.thumbnail(
      .path(entry.url), spec: ValidSpec(ThumbnailSpec(width: box, height: box)))
    #expect(fromFile == thumbnail)
  }

  /// A file's thumbnails in a `box` x `box` box, from memory and streamed from its file, or
  /// the errors they gave.
  static func made(_ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int) throws
    -> [Result<Thumbnail, ThumbnailError>]
  {
    let bytes = try Corpus.bytes(entry.path)
    let spec = try ValidSpec(ThumbnailSpec(width: box, height: box))
    return [
      Result { () throws(ThumbnailError) in try thumbnailer.thumbnail(.bytes(bytes), spec: spec) },
      Result { () throws(ThumbnailError) in
        try thumbnailer.thumbnail(.path(entry.url), spec: spec)
      },
    ]
  }

  /// `made` on a thread of its own, for a thumbnailer whose frames come from a sandboxed
  /// worker: one file can hold its caller up to the worker's deadline, and the cooperative
  /// threads (one a core) are every other suite's too (a fetch beside them was once starved
  /// past its deadline).
  static func madeOffPool(_ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int)
    async throws -> [Result<Thumbnail, ThumbnailError>]
  {
    try await offPool { try made(entry, thumbnailer: thumbnailer, box: box) }
  }

  /// An `either` file decodes inside the box or fails with a typed error, from memory and
  /// streamed from its file.
  static func expectHandled(_ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int) throws {
    expectHandled(try made(entry, thumbnailer: thumbnailer, box: box), box: box)
  }

  /// Each of `made` is inside the box, or a typed error.
  static func expectHandled(_ made: [Result<Thumbnail, ThumbnailError>], box: Int) {
    for outcome in made {
      switch outcome {
      case .success(let thumbnail):
        #expect(thumbnail.width > 0 && thumbnail.width <= box)
        #expect(thumbnail.height > 0 && thumbnail.height <= box)
      case .failure(let error): #expect(!error.kind.isEmpty)
      }
    }
  }

  /// A must-reject file gives a typed error, from memory and streamed from its file.
  static func expectRejected(_ entry: Corpus.Entry, thumbnailer: Thumbnailer, box: Int) {
    #expect(throws: Never.self) {
      expectRejected(try made(entry, thumbnailer: thumbnailer, box: box), entry)
    }
  }

  /// Each of `made` (of a must-reject file) is a typed error.
  static func expectRejected(_ made: [Result<Thumbnail, ThumbnailError>], _ entry: Corpus.Entry) {
    for outcome in made {
      guard case .failure(let error) = outcome else {
        Issue.record("\(entry.path) was decoded")
        continue
      }
      #expect(!error.kind.isEmpty)
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
