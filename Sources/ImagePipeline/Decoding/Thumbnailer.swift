import CImageCodecs
import CSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// Turns encoded bytes of any `SourceFormat` into an encoded thumbnail.
///
/// The work is synchronous and CPU-bound: it blocks the calling thread for the whole decode, so
/// callers in async code must run it on threads of their own, not on the cooperative pool.
public struct Thumbnailer: Sendable {
  /// Header guards applied before decoding.
  public var limits: DecodingLimits
  /// Kernel of the final reduction.
  public var filter: ResamplingFilter
  /// Whether decoders deliver a smaller size when they can (JPEG DCT scaling, WebP scaled
  /// decoding, a HEIF's embedded thumbnail). Turning it off is for reference measurements.
  public var shrinkOnLoad: Bool
  /// zlib level for PNG output (0...9); thumbnails favour speed. Photographs (JPEG, HEIC
  /// and AVIF sources) are Paeth-filtered and run-length coded at any level but 0.
  public var pngCompressionLevel: Int
  /// AVIF encoder speed, 0 (slowest, smallest) ... 9 (fastest).
  public var avifSpeed = Thumbnailer.defaultAVIFSpeed
  /// The AVIF speed chosen by measurement at 256 px (docs/BENCHMARKS.md, "Encoding").
  public static let defaultAVIFSpeed = Int(IC_AVIF_DEFAULT_SPEED)
  /// The HEVC decoder HEIC images go through: "ffmpeg" (libavcodec, loaded on first use) or,
  /// where libavcodec is missing, "libde265" (libheif's own).
  public static var hevcDecoder: String { String(cString: ic_hevc_decoder()) }
  /// Whether common PNGs take the fast IDAT path; off only to compare it with libpng's.
  var pngFastPath = true
  /// Whether progressive JPEGs at 1/8 decode from their DC scans alone; off only to compare
  /// with libjpeg's whole-image decode.
  var progressiveDC = true
  /// Threads one decode may use: a sequential JPEG with restart markers is decoded in this
  /// many bands at once (at most 16), each on a thread of its own. 0 (the default) is as many
  /// as there are cores no other decode is using; 1 decodes every image in one piece, on the
  /// calling thread.
  public var threadsPerDecode = 0
  /// Whether HEIC and AVIF rows are interleaved from libheif's planar RGB; off only to compare
  /// with libheif's own interleaved conversion.
  var heifPlanar = true
  /// Whether each thumbnail also carries its `Placeholder` (from a summary of its pixels, a
  /// few tens of microseconds).
  public var makesPlaceholders = false
  /// Whether HEIC decodes on FFmpeg's HEVC decoder (when libavcodec loads); off only to
  /// compare with libheif's own, libde265.
  var hevcOnFFmpeg = true
  /// Where a video's frame and a drawing's picture come from (`FrameSource` sniffs one by
  /// content): thumbd's worker in a sandbox (`VideoFrames`) in the daemon and the CLI. Nil
  /// (the default) refuses them as `unsupportedFormat`. The picture is decoded again here,
  /// under `limits`.
  public var frames: (any FrameExtractor)?

  /// Creates a thumbnailer with the given limits and defaults elsewhere.
  public init(
    limits: DecodingLimits = DecodingLimits(), filter: ResamplingFilter = .lanczos3Area,
    shrinkOnLoad: Bool = true, pngCompressionLevel: Int = 2
  ) {
    self.limits = limits
    self.filter = filter
    self.shrinkOnLoad = shrinkOnLoad
    self.pngCompressionLevel = pngCompressionLevel
  }

  /// Where a source's bytes are: `ic_source`'s three ways.
  public enum Source: Sendable {
    /// Bytes in memory (a download, a memory file's contents).
    case bytes([UInt8])
    /// A file by path. A regular file is opened once and read by descriptor (so a video or a
    /// drawing goes to `frames`); anything else (a FIFO) streams from the path, and its bytes
    /// are gone.
    case path(String)
    /// An open file, read from its start and not closed: open it once, check what it is
    /// (`fstat`), then decode that, with no race against the path changing in between.
    /// `name` hints a video's container by its extension; nothing else of it is used.
    case descriptor(Int32, name: String = "input")
  }

  /// Makes a thumbnail of `source` for a checked spec (`ValidSpec(spec)` checks one).
  public func thumbnail(
    _ source: Source, spec: ValidSpec, cancellation: CancellationFlag? = nil
  ) throws(ThumbnailError) -> Thumbnail {
    try measuredThumbnail(source, spec: spec, cancellation: cancellation).thumbnail
  }

  /// Time spent in the codec, for the pipeline's per-stage histograms.
  struct Timings {
    /// Seconds decoding and resampling.
    var decode: Double
    /// Seconds encoding.
    var encode: Double
  }

  /// Like `thumbnail(_:spec:cancellation:)`, with the codec's own timings.
  func measuredThumbnail(
    _ source: Source, spec valid: ValidSpec, cancellation: CancellationFlag? = nil
  ) throws(ThumbnailError) -> (thumbnail: Thumbnail, timings: Timings) {
    let spec = valid.spec
    return try withOpened(source) { opened throws(ThumbnailError) in
      if let framed = opened.framed {
        let extractor = try frames(for: framed.source)
        let started = ContinuousClock.now
        let thumbnail = try framedThumbnail(
          framed, extractor, spec: spec, cancellation: cancellation)
        return (thumbnail, Timings(decode: (ContinuousClock.now - started).seconds, encode: 0))
      }
      var result = ic_result()
      opened.withSource { source in run(&source, spec, cancellation, &result) }
      let timings = Timings(
        decode: Double(result.decode_ns) / 1e9, encode: Double(result.encode_ns) / 1e9)
      return (try finish(&result), timings)
    }
  }

  /// A preview of `source` for `spec`: the cheapest early picture it carries (a JPEG's EXIF
  /// thumbnail of the image's shape, a progressive JPEG's first DC scans, a HEIF's embedded
  /// thumbnail), never larger than that picture, upright, with the image's own source size.
  /// Bytes may be a download's first bytes up to where `PreviewPrefix` found one. Nil when
  /// it carries none (a video or a drawing carries none). A few milliseconds: a 1/8 decode at most.
  public func preview(
    _ source: Source, spec valid: ValidSpec, cancellation: CancellationFlag? = nil
  ) throws(ThumbnailError) -> Thumbnail? {
    let spec = valid.spec
    return try withOpened(source) { opened throws(ThumbnailError) -> Thumbnail? in
      guard opened.framed == nil else { return nil }
      var result = ic_result()
      opened.withSource { source in run(&source, spec, cancellation, &result, preview: true) }
      if result.status == IC_ERR_UNSUPPORTED {
        ic_result_free(&result)
        return nil
      }
      return try finish(&result)
    }
  }

  /// The working memory a thumbnail of `source` will need, from its header alone (see
  /// `MemoryEstimate`). Throws what `thumbnail(_:spec:)` would throw for the header. A path
  /// that is not a regular file (a FIFO) has those bytes read and gone.
  public func estimate(_ source: Source, spec valid: ValidSpec) throws(ThumbnailError)
    -> MemoryEstimate
  {
    try withOpened(source) { opened throws(ThumbnailError) in
      if opened.framed != nil { return framedEstimate(valid.spec) }
      var source = ic_source()
      var request = cRequest(valid.spec)
      var limits = cLimits
      var estimate = ic_estimate()
      var result = ic_result()
      let status = opened.withSource { opened in
        source = opened
        return ic_estimate_thumbnail(&source, &request, &limits, &estimate, &result)
      }
      guard status == IC_OK else { throw CodecResult.error(of: &result) }
      return MemoryEstimate(
        bytes: Int(clamping: estimate.bytes),
        decodeWidth: Int(estimate.decode_width), decodeHeight: Int(estimate.decode_height),
        sourceWidth: Int(estimate.source_width), sourceHeight: Int(estimate.source_height),
        firstUse: Int(clamping: estimate.first_use))
    }
  }

  /// Decodes a whole image at full resolution, upright. For references and tests only: it
  /// holds every pixel in memory.
  public func decodeFullResolution(_ source: Source) throws(ThumbnailError) -> Bitmap {
    var outcome: Result<Bitmap, ThumbnailError> = .failure(.io("no source"))
    switch source {
    case .bytes(let bytes):
      bytes.withUnsafeBufferPointer { buffer in
        outcome = decodeFull(
          ic_source(data: buffer.baseAddress, size: buffer.count, path: nil, fd: -1))
      }
    case .path(let path):
      PathBytes.withCString(path) {
        outcome = decodeFull(ic_source(data: nil, size: 0, path: $0, fd: -1))
      }
    case .descriptor(let descriptor, _):
      outcome = decodeFull(ic_source(data: nil, size: 0, path: nil, fd: descriptor))
    }
    return try outcome.get()
  }

  /// A source made ready for the codecs: bytes, an open file (opened here for a regular
  /// file's path, closed after), or a path to stream from; and the video or drawing it holds.
  private struct Opened {
    enum Place {
      case bytes(UnsafeBufferPointer<UInt8>)
      case descriptor(Int32)
      case path(UnsafePointer<CChar>)
    }
    let place: Place
    /// A video or drawing, and the descriptor and name the extractor reads it by.
    var framed: Framed?

    func withSource<T>(_ body: (inout ic_source) -> T) -> T {
      var source =
        switch place {
        case .bytes(let buffer):
          ic_source(data: buffer.baseAddress, size: buffer.count, path: nil, fd: -1)
        case .descriptor(let descriptor): ic_source(data: nil, size: 0, path: nil, fd: descriptor)
        case .path(let path): ic_source(data: nil, size: 0, path: path, fd: -1)
        }
      return body(&source)
    }
  }

  /// Runs `body` on `source` made ready: a video or drawing in bytes is put in a memory file
  /// for the extractor, a regular file's path is opened once.
  private func withOpened<T>(
    _ source: Source, _ body: (Opened) throws(ThumbnailError) -> T
  ) throws(ThumbnailError) -> T {
    switch source {
    case .bytes(let bytes):
      if let framed = FrameSource.sniff(bytes) {
        let file = try Self.memoryFile(holding: bytes)
        defer { close(file) }
        return try body(
          Opened(place: .descriptor(file), framed: Framed(source: framed, descriptor: file)))
      }
      return try bytes.withUnsafeBufferPointer { buffer throws(ThumbnailError) in
        try body(Opened(place: .bytes(buffer)))
      }
    case .descriptor(let descriptor, let name):
      return try body(
        Opened(
          place: .descriptor(descriptor),
          framed: Self.framed(in: descriptor, name: name)))
    case .path(let path):
      let file = PathBytes.withCString(path) {
        open($0, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
      }
      defer { if file >= 0 { close(file) } }
      var status = stat()
      if file >= 0, fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG {
        let name = String(path.split(separator: "/").last ?? "input")
        return try body(
          Opened(
            place: .descriptor(file), framed: Self.framed(in: file, name: name)))
      }
      return try PathBytes.withCString(path) { text in
        Result { () throws(ThumbnailError) in try body(Opened(place: .path(text))) }
      }.get()
    }
  }

  /// Decodes a file at the smallest size its decoder offers (JPEG DCT scaling) that covers
  /// `width` x `height` in the stored frame, upright. For references and tests only.
  func decodeScaled(contentsOf path: String, atLeast width: Int, _ height: Int)
    throws(ThumbnailError) -> Bitmap
  {
    try path.withCString { cPath in
      decodeFull(ic_source(data: nil, size: 0, path: cPath, fd: -1), atLeast: (width, height))
    }.get()
  }

  private func decodeFull(_ source: ic_source, atLeast size: (Int, Int)? = nil) -> Result<
    Bitmap, ThumbnailError
  > {
    _ = ColourManagement.defaultsLoaded
    var source = source
    var limits = cLimits
    var bitmap = ic_bitmap()
    var info = ic_result()
    defer { ic_bitmap_free(&bitmap) }
    let status =
      if let size {
        ic_decode_scaled(
          &source, &limits, UInt32(clamping: size.0), UInt32(clamping: size.1), &bitmap, &info)
      } else {
        ic_decode_full(&source, &limits, &bitmap, &info)
      }
    guard status == IC_OK else {
      return .failure(CodecResult.error(of: &info))
    }
    let count = Int(bitmap.width) * Int(bitmap.height) * Int(bitmap.channels)
    return .success(
      Bitmap(
        pixels: Array(UnsafeBufferPointer(start: bitmap.pixels, count: count)),
        width: Int(bitmap.width), height: Int(bitmap.height), channels: Int(bitmap.channels)))
  }

  private var cLimits: ic_limits {
    var limits = ic_limits()
    ic_limits_init(&limits)
    limits.max_width = UInt32(clamping: self.limits.maxWidth)
    limits.max_height = UInt32(clamping: self.limits.maxHeight)
    limits.max_pixels = UInt64(clamping: self.limits.maxPixels)
    limits.max_decoder_memory = UInt64(clamping: self.limits.maxDecoderMemory)
    limits.accept_damaged = self.limits.acceptDamaged ? 1 : 0
    limits.disable_png_fast_path = pngFastPath ? 0 : 1
    limits.disable_progressive_dc = progressiveDC ? 0 : 1
    limits.heif_interleaved = heifPlanar ? 0 : 1
    limits.hevc_libde265 = hevcOnFFmpeg ? 0 : 1
    let timeout = self.limits.decodeTimeout
    limits.decode_timeout_ms =
      timeout.isFinite && timeout > 0 ? UInt32(min(timeout * 1000, 4e9).rounded(.up)) : 0
    limits.max_scans = UInt32(clamping: self.limits.maxScans)
    limits.max_scan_passes = UInt32(clamping: self.limits.maxScanPasses)
    limits.max_profile_bytes = UInt32(clamping: self.limits.maxProfileBytes)
    limits.threads_per_decode = UInt32(clamping: max(0, threadsPerDecode))
    return limits
  }

  func cRequest(_ spec: ThumbnailSpec) -> ic_request {
    var request = ic_request()
    ic_request_init(&request)
    request.width = UInt32(spec.pixelWidth)
    request.height = UInt32(spec.pixelHeight)
    request.fit =
      switch spec.fit {
      case .contain: IC_FIT_CONTAIN
      case .cover: IC_FIT_COVER
      case .fill: IC_FIT_FILL
      case .auto: IC_FIT_AUTO
      }
    request.format =
      spec.format.imageFormat.map { ic_output_format($0.codecFormat.rawValue) }
      ?? IC_OUTPUT_AUTO
    request.quality = Int32(spec.quality)
    request.allow_upscale = spec.allowUpscale ? 1 : 0
    request.png_level = Int32(max(0, min(9, pngCompressionLevel)))
    request.avif_speed = Int32(max(0, min(9, avifSpeed)))
    request.filter = filter.cValue
    request.shrink_on_load = shrinkOnLoad ? 1 : 0
    request.colour = spec.colour.cValue
    request.summary = makesPlaceholders ? 1 : 0
    request.geometry = spec.geometry.cValue(scale: spec.scale)
    request.effects = spec.filters.cValue(scale: spec.scale)
    request.max_frames = UInt32(clamping: spec.keptFrames)
    return request
  }

  private func run(
    _ source: inout ic_source, _ spec: ThumbnailSpec, _ cancellation: CancellationFlag?,
    _ result: inout ic_result, preview: Bool = false
  ) {
    _ = ColourManagement.defaultsLoaded
    var request = cRequest(spec)
    request.preview = preview ? 1 : 0
    var limits = cLimits
    guard let watermark = spec.watermark else {
      _ = ic_thumbnail(&source, &request, &limits, cancellation?.storage, &result)
      return
    }
    watermark.image.pixels.withUnsafeBufferPointer { pixels in
      request.watermark = watermark.cValue(scale: spec.scale, pixels: pixels.baseAddress!)
      _ = ic_thumbnail(&source, &request, &limits, cancellation?.storage, &result)
    }
  }

  /// The video or drawing the open file's first bytes show, or nil.
  static func framed(in descriptor: Int32, name: String) -> Framed? {
    var head = [UInt8](repeating: 0, count: FrameSource.sniffLength)
    let read = head.withUnsafeMutableBytes {
      pread(descriptor, $0.baseAddress, FrameSource.sniffLength, 0)
    }
    guard read > 0, let source = FrameSource.sniff(head[..<read]) else { return nil }
    return Framed(source: source, descriptor: descriptor, name: name)
  }

  /// A source a `FrameExtractor` pictures: what it is, and the descriptor and name the
  /// extractor reads it by.
  struct Framed {
    var source: FrameSource
    var descriptor: Int32
    var name = "input"
  }

  /// A memory file holding `bytes`, opened read-only (what an extractor reads by descriptor).
  static func memoryFile(holding bytes: [UInt8]) throws(ThumbnailError) -> Int32 {
    let file = ts_memory_file()
    guard file >= 0 else { throw .outOfMemory("no memory file for the source") }
    defer { close(file) }
    var written = 0
    while written < bytes.count {
      let count = bytes.withUnsafeBytes {
        pwrite(file, $0.baseAddress! + written, $0.count - written, off_t(written))
      }
      if count < 0 && errno == EINTR { continue }
      guard count > 0 else { throw .outOfMemory("cannot hold the source in memory") }
      written += count
    }
    let readOnly = open("/proc/self/fd/\(file)", O_RDONLY | O_CLOEXEC)
    guard readOnly >= 0 else { throw .io("cannot reopen the source's memory file") }
    return readOnly
  }

  /// The extractor for a video or a drawing, or the refusal that names what is missing.
  private func frames(for source: FrameSource) throws(ThumbnailError) -> any FrameExtractor {
    guard let frames else {
      throw .unsupportedFormat(
        "\(source.description): its picture needs thumbd's worker (thumbd-frame) and bubblewrap"
      )
    }
    return frames
  }

  /// What a video's or a drawing's thumbnail holds: the extractor's picture (at most twice
  /// the box each way, 3 or 4 bytes a pixel) and its decode.
  private func framedEstimate(_ spec: ThumbnailSpec) -> MemoryEstimate {
    let side = { (pixels: Int) in pixels > 0 ? 2 * pixels : 4_096 }
    let (width, height) = (side(spec.pixelWidth), side(spec.pixelHeight))
    return MemoryEstimate(
      bytes: width * height * 7, decodeWidth: width, decodeHeight: height, sourceWidth: 0,
      sourceHeight: 0)
  }

  /// The thumbnail of the video or drawing `framed`: the extractor's picture, decoded by the
  /// codecs here under `limits`, reporting the source's own displayed size (and a video's
  /// length).
  private func framedThumbnail(
    _ framed: Framed, _ extractor: any FrameExtractor, spec: ThumbnailSpec,
    cancellation: CancellationFlag?
  ) throws(ThumbnailError) -> Thumbnail {
    let frame = try extractor.frame(
      ofFile: framed.descriptor, source: framed.source, name: framed.name,
      width: spec.pixelWidth, height: spec.pixelHeight, limits: limits,
      cancellation: cancellation)
    // The box is applied to the video's own size: the frame's, rounded by the worker, could
    // round the other side differently. So a contained thumbnail is asked for at the size
    // the video gives, exactly.
    var used = spec
    var request = cRequest(spec)
    var (width, height): (UInt32, UInt32) = (0, 0)
    if let size = frame.sourceSize, spec.fit == .contain, spec.geometry.isIdentity,
      ic_output_size(UInt32(size.0), UInt32(size.1), 1, &request, &width, &height) == IC_OK
    {
      (used.width, used.height, used.scale, used.fit) = (Int(width), Int(height), 1, .fill)
      used.allowUpscale = true
    }
    // A crop is in the video's pixels; the frame is smaller.
    if let size = frame.sourceSize, size.0 > 0, let frameWidth = Self.bitmapWidth(frame.image) {
      used.geometry.scaleCrop(by: Double(frameWidth) / Double(size.0))
    }
    var result = ic_result()
    frame.image.withUnsafeBufferPointer { buffer in
      var source = ic_source(data: buffer.baseAddress, size: buffer.count, path: nil, fd: -1)
      run(&source, used, cancellation, &result)
    }
    var thumbnail = try finish(&result)
    if let size = frame.sourceSize {
      (thumbnail.sourceWidth, thumbnail.sourceHeight) = size
      thumbnail.placeholder?.sourceWidth = size.0
      thumbnail.placeholder?.sourceHeight = size.1
    }
    thumbnail.duration = frame.duration
    return thumbnail
  }

  /// The width a BMP's header gives (what the frame worker writes), or nil.
  static func bitmapWidth(_ image: [UInt8]) -> Int? {
    guard image.count >= 26, image[0] == UInt8(ascii: "B"), image[1] == UInt8(ascii: "M") else {
      return nil
    }
    let width = (18..<22).reversed().reduce(0) { $0 << 8 | Int(image[$1]) }
    return width > 0 && width < 1 << 20 ? width : nil
  }

  private func finish(_ result: inout ic_result) throws(ThumbnailError) -> Thumbnail {
    defer { ic_result_free(&result) }
    guard result.status == IC_OK, let format = ImageFormat(result.format) else {
      throw CodecResult.error(of: &result)
    }
    var thumbnail = Thumbnail(
      data: Array(UnsafeBufferPointer(start: result.data, count: result.size)),
      format: format, width: Int(result.width), height: Int(result.height),
      hasAlpha: result.has_alpha != 0, sourceWidth: Int(result.source_width),
      sourceHeight: Int(result.source_height), orientation: Int(result.orientation),
      damageWarnings: Int(result.damage_warnings))
    thumbnail.decodedFromDCScans = result.dc_only != 0
    thumbnail.decodeBands = Int(result.jpeg_bands)
    thumbnail.decodeBandShare = Double(result.jpeg_band_share) / 1000
    thumbnail.profile = ProfileOutcome(result.profile)
    thumbnail.profileTransformCached = result.transform_cached != 0
    thumbnail.frames = max(1, Int(result.frames))
    if let summary = result.summary {
      let (width, height) = (Int(result.summary_width), Int(result.summary_height))
      thumbnail.placeholder = Placeholder(
        summary: Array(UnsafeBufferPointer(start: summary, count: width * height * 4)),
        width: width, height: height, sourceWidth: thumbnail.sourceWidth,
        sourceHeight: thumbnail.sourceHeight, orientation: thumbnail.orientation)
    }
    return thumbnail
  }
}
