import CImageCodecs

/// Encodes bitmaps with the same encoders the thumbnailer uses.
public enum ImageEncoder {
  /// PNG, 8-bit RGB or RGBA, at the given zlib level (0...9), Adam7-interlaced if asked.
  public static func png(_ bitmap: Bitmap, level: Int = 6, interlaced: Bool = false)
    throws(ThumbnailError) -> [UInt8]
  {
    try encode(bitmap, IC_FORMAT_PNG) {
      $0.png_level = Int32(max(0, min(9, level)))
      $0.png_interlaced = interlaced ? 1 : 0
    }
  }

  /// JPEG, 4:2:0, at the given quality (1...100), baseline or progressive (libjpeg's standard
  /// script: DC scans first). Alpha is composited over white.
  public static func jpeg(
    _ bitmap: Bitmap, quality: Int = 90, progressive: Bool = false
  ) throws(ThumbnailError) -> [UInt8] {
    try encode(bitmap, IC_FORMAT_JPEG) {
      $0.quality = Int32(max(1, min(100, quality)))
      $0.jpeg_progressive = progressive ? 1 : 0
    }
  }

  /// WebP at the given quality (1...100), alpha kept. `exact` keeps the colour of fully
  /// transparent pixels as given (libwebp otherwise smooths it); `lossless` writes VP8L.
  public static func webp(
    _ bitmap: Bitmap, quality: Int = 80, exact: Bool = false, lossless: Bool = false
  ) throws(ThumbnailError) -> [UInt8] {
    try encode(bitmap, IC_FORMAT_WEBP) {
      $0.quality = Int32(max(1, min(100, quality)))
      $0.webp_exact = exact ? 1 : 0
      $0.webp_lossless = lossless ? 1 : 0
    }
  }

  /// AVIF at the given quality (1...100), alpha kept, at the default encoder speed. An
  /// `orientation` of 2...8 (EXIF's numbering) is stored as HEIF `irot`/`imir` boxes, so the
  /// file displays the bitmap turned that way.
  public static func avif(
    _ bitmap: Bitmap, quality: Int = 80, orientation: Int = 1
  ) throws(ThumbnailError) -> [UInt8] {
    try encode(bitmap, IC_FORMAT_AVIF) {
      $0.quality = Int32(max(1, min(100, quality)))
      $0.avif_orientation = (2...8).contains(orientation) ? Int32(orientation) : 0
    }
  }

  private static func encode(
    _ bitmap: Bitmap, _ format: ic_format, _ configure: (inout ic_encode_options) -> Void
  ) throws(ThumbnailError) -> [UInt8] {
    var options = ic_encode_options()
    ic_encode_options_init(&options)
    configure(&options)
    var result = ic_result()
    defer { ic_result_free(&result) }
    var pixels = bitmap.pixels
    let status = pixels.withUnsafeMutableBufferPointer { buffer in
      var image = ic_bitmap(
        pixels: buffer.baseAddress, width: UInt32(bitmap.width), height: UInt32(bitmap.height),
        channels: Int32(bitmap.channels))
      return ic_encode(&image, format, &options, &result)
    }
    guard status == IC_OK else {
      throw .encodingFailed(CodecResult.message(of: &result))
    }
    return Array(UnsafeBufferPointer(start: result.data, count: result.size))
  }
}
