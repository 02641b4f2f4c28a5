import ImagePipeline

extension SourceFormat {
  /// The decoder fuzz target that reads this format, and what it covers: formats one library
  /// decodes (HEIC and AVIF: libheif) share one. An exhaustive switch, so a new format is not
  /// built until it says which target fuzzes it.
  var fuzzTarget: (name: String, covers: String) {
    switch self {
    case .jpeg:
      (
        "decode-jpeg",
        "libjpeg-turbo with DCT scaling, the DC-scan path, the EXIF reader and thumbnail, the scan limits"
      )
    case .png:
      ("decode-png", "libpng streaming and the fast inflate path, chunk limits and budgets")
    case .webp:
      (
        "decode-webp",
        "libwebp scaled incremental decoding, first frames, EXIF chunks; animations through libwebp's animation decoder and encoder"
      )
    case .gif:
      (
        "decode-gif",
        "giflib records and LZW, the first frame on its screen, interlacing; animations kept as animated WebP (our block walker, disposal, delays)"
      )
    case .heic, .avif:
      ("decode-heif", "libheif boxes, HEVC and AV1 images, transforms, thumbnails")
    case .tiff:
      (
        "decode-tiff",
        "libtiff's directories, strips and tiles, codecs (LZW, Deflate, PackBits, JPEG), reduced-resolution levels, our sample expansion and its RGBA reader"
      )
    case .jxl:
      (
        "decode-jxl",
        "libjxl's container and codestream, our header and frame reader (jxl_header.c) and its checks before pixels, the first frame and the DC-only stop"
      )
    case .raw:
      (
        "decode-raw",
        "our camera RAW walker (TIFF-structured raws' IFDs and SubIFDs, RAF headers, CR3 boxes, CIFF heaps) and the JPEG previews it finds"
      )
    case .bmp, .ico:
      (
        "decode-bmp",
        "our BMP parser (every header version, bit depth, bit fields, RLE4 and RLE8) and ICO directories with their PNG and DIB entries and AND masks"
      )
    }
  }
}

/// The most pixels a decoder target decodes for one input (4096 x 4096): the daemon's 100 MP
/// would be 12 s of one libjxl decode under the sanitizers, past libFuzzer's `-timeout`, and a
/// 6 KB lossless JPEG XL of 28 MP took 10.8 s over three boxes. Every parser's path up to the
/// pixels is still fuzzed above it: the header is read, and the source refused by its size.
let fuzzMaxPixels = 1 << 24

extension FuzzTarget {
  /// One decoder target per decoding library, made from `SourceFormat.allCases`: every format
  /// thumbd reads is fuzzed, seeded with the corpus's files of its extensions.
  static let decoders: [FuzzTarget] = {
    var names: [String] = []
    var formats: [String: [SourceFormat]] = [:]
    for format in SourceFormat.allCases {
      let name = format.fuzzTarget.name
      if formats[name] == nil { names.append(name) }
      formats[name, default: []].append(format)
    }
    return names.map { decoder($0, formats[$0]!) }
  }()

  /// A target for one decoder, through the thumbnailer at its default limits and three output
  /// boxes (one resized and JPEG-encoded, one cropped and PNG-encoded, one so small that a JPEG
  /// of 42 px or more decodes at 1/8, where progressive files take the DC-scan path), and the
  /// memory estimate, which must succeed wherever the thumbnail does. Each box is made in one
  /// piece and, for a JPEG, in three bands (restart markers, jpeg_bands.c), which must agree:
  /// the same thumbnail, or the same kind of error. The decode deadline is
  /// off: what bounds the work must be the decoder's own limits, and libFuzzer's `-timeout`
  /// catches an input those miss (as the repeated-scan and trailing-zlib findings would have
  /// been). The work is bounded by pixels too: sources over `fuzzMaxPixels` are refused, and
  /// the further boxes are made only while the pixels decoded for the input stay within it.
  private static func decoder(_ name: String, _ formats: [SourceFormat]) -> FuzzTarget {
    FuzzTarget(
      name: name,
      covers:
        "Thumbnailer over \(formats.map(\.displayName).joined(separator: " and ")) (\(formats[0].fuzzTarget.covers)): a thumbnail inside the box, or a typed ThumbnailError other than a timeout, and the same of its previews (whole, and of the first bytes the prefix watch points at); no crash, leak or out-of-bounds access",
      maxLength: 262_144,
      seedExtensions: formats.flatMap(\.fileExtensions)
    ) { bytes in
      guard let sniffed = SourceFormat.sniff(bytes), formats.contains(sniffed) else { return }
      var thumbnailer = Thumbnailer()
      thumbnailer.limits.decodeTimeout = 0
      thumbnailer.limits.maxPixels = fuzzMaxPixels
      thumbnailer.threadsPerDecode = 1
      // Bands exist for JPEG alone: elsewhere a second pass would only double the work per
      // input, and push a slow-but-bounded one past libFuzzer's `-timeout`.
      var banded: Thumbnailer? = nil
      if sniffed == .jpeg {
        banded = thumbnailer
        banded?.threadsPerDecode = 3
      }
      var decoded = 0
      for spec in [
        ThumbnailSpec(width: 48, height: 48),
        ThumbnailSpec(width: 31, height: 17, fit: .cover, format: .png),
        ThumbnailSpec(width: 3, height: 3),
      ] {
        let estimate = try? thumbnailer.estimate(.bytes(bytes), spec: ValidSpec(spec))
        if let estimate {
          let pixels = estimate.decodeWidth * estimate.decodeHeight
          if decoded > 0 && decoded + pixels > fuzzMaxPixels { break }
          decoded += pixels
        }
        let inBands: Result<Thumbnail, ThumbnailError>? = banded.map { banded in
          Result { () throws(ThumbnailError) in
            try banded.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
          }
        }
        do throws(ThumbnailError) {
          let thumbnail = try thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
          require(
            thumbnail.width >= 1 && thumbnail.width <= spec.pixelWidth && thumbnail.height >= 1
              && thumbnail.height <= spec.pixelHeight,
            "\(thumbnail.width)x\(thumbnail.height) outside \(spec.pixelWidth)x\(spec.pixelHeight)")
          require(ImageFormat.sniff(thumbnail.data) != nil, "output is not an image")
          require(estimate != nil, "a thumbnail was made, but its estimate failed")
          if let inBands {
            require(
              (try? inBands.get()) == thumbnail, "in bands, the thumbnail differs from one piece's")
          }
        } catch {
          require(error.kind != "decode_timeout", "a decode ran into the deadline")
          switch inBands {
          case nil: break
          case .failure(let banded)?:
            require(
              banded.kind == error.kind, "in bands: \(banded.kind), in one piece: \(error.kind)")
          case .success?:
            require(false, "in bands a thumbnail was made, in one piece: \(error.kind)")
          }
        }
      }
      if sniffed == .gif || sniffed == .webp { animated(bytes, thumbnailer) }
      previews(of: bytes, thumbnailer)
    }
  }

  /// An animated GIF or WebP kept animated (at most 8 frames, with a rotation and padding on
  /// every frame), as WebP or GIF by the input's length: an animation of that format inside
  /// the box that our own decoder reads again, or a typed error; never a decode timeout.
  private static func animated(_ bytes: [UInt8], _ thumbnailer: Thumbnailer) {
    let format: OutputFormat = bytes.count % 2 == 0 ? .webp : .gif
    var spec = ThumbnailSpec(width: 40, height: 30, fit: .cover, format: format)
    spec.maxFrames = 8
    spec.geometry.rotation = 90
    spec.geometry.padding = Padding(top: 1)
    do throws(ThumbnailError) {
      let thumbnail = try thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
      require(thumbnail.frames >= 1 && thumbnail.frames <= 8, "\(thumbnail.frames) frames")
      require(
        thumbnail.width <= spec.pixelWidth && thumbnail.height <= spec.pixelHeight + 1,
        "\(thumbnail.width)x\(thumbnail.height) outside the box")
      require(
        ImageFormat.sniff(thumbnail.data) == format.imageFormat, "an animation not a \(format)")
      do throws(ThumbnailError) {
        _ = try thumbnailer.thumbnail(
          .bytes(thumbnail.data), spec: ValidSpec(ThumbnailSpec(width: 8, height: 8)))
      } catch {
        require(false, "the animation made does not read again: \(error.kind)")
      }
    } catch {
      require(error.kind != "decode_timeout", "an animation ran into the deadline")
    }
  }

  /// Previews of the whole input and of the first bytes the prefix watch points at (fed 509
  /// bytes at a time, as a download arrives): inside the box, or refused with a typed error.
  private static func previews(of bytes: [UInt8], _ thumbnailer: Thumbnailer) {
    let spec = ThumbnailSpec(width: 48, height: 48)
    var watch = PreviewPrefix()
    var inputs = [bytes]
    var end = 0
    watching: while end < bytes.count {
      end = min(bytes.count, end + 509)
      switch bytes.withUnsafeBytes({ watch.look(at: UnsafeRawBufferPointer(rebasing: $0[..<end])) })
      {
      case .more: continue
      case .none: break watching
      case .ready(let size):
        require(size <= end, "the watch pointed past the bytes it was given")
        inputs.append(Array(bytes[..<size]))
        break watching
      }
    }
    for input in inputs {
      do throws(ThumbnailError) {
        guard let preview = try thumbnailer.preview(.bytes(input), spec: ValidSpec(spec)) else {
          continue
        }
        require(
          preview.width >= 1 && preview.width <= spec.pixelWidth && preview.height >= 1
            && preview.height <= spec.pixelHeight,
          "preview \(preview.width)x\(preview.height) outside the box")
      } catch {
        require(error.kind != "decode_timeout", "a preview ran into the deadline")
      }
    }
  }
}
