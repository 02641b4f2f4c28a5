import ImagePipeline

extension FuzzTarget {
  /// The JPEG decoders (libjpeg-turbo, our DC-scan reader for progressive files at 1/8, our
  /// EXIF reader, the scan limits).
  static let decodeJPEG = decoder(
    "decode-jpeg", .jpeg,
    "libjpeg-turbo with DCT scaling, the DC-scan path, the EXIF reader and the scan limits")

  /// The PNG decoders (the libpng streaming path and the fast path).
  static let decodePNG = decoder(
    "decode-png", .png, "libpng streaming and the fast inflate path, chunk limits and budgets")

  /// The WebP decoder (libwebp's incremental decoder with scaling, the demuxer's first frame
  /// on its canvas, the EXIF chunk).
  static let decodeWebP = decoder(
    "decode-webp", .webp, "libwebp scaled incremental decoding, first frames, EXIF chunks")

  /// The GIF decoder (giflib's records and LZW, our canvas, interlacing and clipping).
  static let decodeGIF = decoder(
    "decode-gif", .gif, "giflib records and LZW, the first frame on its screen, interlacing")

  /// The HEIF decoders (libheif's boxes, HEVC and AV1 through libde265 and dav1d, transforms,
  /// embedded thumbnails, the pixel limits).
  static let decodeHEIF = decoder(
    "decode-heif", .heic, "libheif boxes, HEVC and AV1 images, transforms, thumbnails",
    also: [.avif])

  /// A target for one decoder, through the thumbnailer at its default limits and three output
  /// boxes (one resized and JPEG-encoded, one cropped and PNG-encoded, one so small that a JPEG
  /// of 42 px or more decodes at 1/8, where progressive files take the DC-scan path), and the
  /// memory estimate, which must succeed wherever the thumbnail does. The decode deadline is
  /// off: what bounds the work must be the decoder's own limits, and libFuzzer's `-timeout`
  /// catches an input those miss (as the repeated-scan and trailing-zlib findings would have
  /// been).
  private static func decoder(
    _ name: String, _ format: SourceFormat, _ what: String, also: [SourceFormat] = []
  ) -> FuzzTarget {
    FuzzTarget(
      name: name,
      covers:
        "Thumbnailer over \(format.rawValue.uppercased()) (\(what)): a thumbnail inside the box, or a typed ThumbnailError other than a timeout, and the same of its previews (whole, and of the first bytes the prefix watch points at); no crash, leak or out-of-bounds access",
      maxLength: 262_144
    ) { bytes in
      guard let sniffed = SourceFormat.sniff(bytes), ([format] + also).contains(sniffed) else {
        return
      }
      var thumbnailer = Thumbnailer()
      thumbnailer.limits.decodeTimeout = 0
      for spec in [
        ThumbnailSpec(width: 48, height: 48),
        ThumbnailSpec(width: 31, height: 17, fit: .cover, format: .png),
        ThumbnailSpec(width: 3, height: 3),
      ] {
        let estimate = try? thumbnailer.estimate(of: bytes, spec: spec)
        do throws(ThumbnailError) {
          let thumbnail = try thumbnailer.thumbnail(of: bytes, spec: spec)
          require(
            thumbnail.width >= 1 && thumbnail.width <= spec.pixelWidth && thumbnail.height >= 1
              && thumbnail.height <= spec.pixelHeight,
            "\(thumbnail.width)x\(thumbnail.height) outside \(spec.pixelWidth)x\(spec.pixelHeight)")
          require(ImageFormat.sniff(thumbnail.data) != nil, "output is not an image")
          require(estimate != nil, "a thumbnail was made, but its estimate failed")
        } catch {
          require(error.kind != "decode_timeout", "a decode ran into the deadline")
        }
      }
      previews(of: bytes, thumbnailer)
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
        guard let preview = try thumbnailer.preview(of: input, spec: spec) else { continue }
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
