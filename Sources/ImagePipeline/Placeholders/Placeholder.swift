import CImageCodecs

/// A picture's rough look, known before its thumbnail is: a ThumbHash, a dominant colour, and
/// the source's size, from which the size of any thumbnail of it follows
/// (`outputSize(for:)`). Made from the pixels of every thumbnail rendered (a summary the
/// decoder averages down to at most 32 pixels a side), kept per source and revision in the
/// pipeline's `PlaceholderIndex`.
public struct Placeholder: Sendable, Hashable {
  /// The ThumbHash, at most 25 bytes.
  public var thumbHash: [UInt8]
  /// The dominant colour, 0xRRGGBB.
  public var colour: UInt32
  /// Stored (pre-orientation) source width.
  public var sourceWidth: Int
  /// Stored (pre-orientation) source height.
  public var sourceHeight: Int
  /// The source's EXIF orientation, 1...8.
  public var orientation: Int

  /// A placeholder with these parts.
  public init(
    thumbHash: [UInt8], colour: UInt32, sourceWidth: Int, sourceHeight: Int, orientation: Int
  ) {
    self.thumbHash = thumbHash
    self.colour = colour
    self.sourceWidth = sourceWidth
    self.sourceHeight = sourceHeight
    self.orientation = orientation
  }

  /// The placeholder of a summary (straight RGBA, `width` x `height`) of a thumbnail of a
  /// source of stored size `sourceWidth` x `sourceHeight` with `orientation`.
  init(
    summary rgba: [UInt8], width: Int, height: Int, sourceWidth: Int, sourceHeight: Int,
    orientation: Int
  ) {
    let (r, g, b) = ThumbHash.dominantColour(rgba: rgba, width: width, height: height)
    self.init(
      thumbHash: ThumbHash.encode(rgba: rgba, width: width, height: height),
      colour: UInt32(r) << 16 | UInt32(g) << 8 | UInt32(b), sourceWidth: sourceWidth,
      sourceHeight: sourceHeight, orientation: orientation)
  }

  /// The placeholder of an encoded thumbnail that came without one (a disk hit made before
  /// placeholders were kept): its pixels decoded (it is small) and averaged down as the
  /// thumbnailer would. nil when its bytes do not decode.
  public init?(decoding thumbnail: Thumbnail) {
    guard let bitmap = try? Thumbnailer().decodeFullResolution(.bytes(thumbnail.data)),
      bitmap.width > 0, bitmap.height > 0, bitmap.channels == 3 || bitmap.channels == 4
    else { return nil }
    var result = ic_result()
    defer { ic_result_free(&result) }
    let status = bitmap.pixels.withUnsafeBufferPointer {
      ic_summarize(
        $0.baseAddress, UInt32(bitmap.width), UInt32(bitmap.height), Int32(bitmap.channels),
        &result)
    }
    guard status == IC_OK, let summary = result.summary else { return nil }
    let (width, height) = (Int(result.summary_width), Int(result.summary_height))
    self.init(
      summary: Array(UnsafeBufferPointer(start: summary, count: width * height * 4)),
      width: width, height: height, sourceWidth: thumbnail.sourceWidth,
      sourceHeight: thumbnail.sourceHeight, orientation: thumbnail.orientation)
  }

  /// The upright source size.
  public var uprightSize: (width: Int, height: Int) {
    (5...8).contains(orientation) ? (sourceHeight, sourceWidth) : (sourceWidth, sourceHeight)
  }

  /// The size, upright, of the thumbnail `spec` gives this source: what the final image of a
  /// load will be. nil when the spec names no box.
  public func outputSize(for spec: ThumbnailSpec) -> (width: Int, height: Int)? {
    var request = Thumbnailer().cRequest(spec)
    var width: UInt32 = 0
    var height: UInt32 = 0
    guard sourceWidth > 0, sourceHeight > 0, sourceWidth <= Int(UInt32.max),
      sourceHeight <= Int(UInt32.max),
      ic_output_size(
        UInt32(sourceWidth), UInt32(sourceHeight), Int32(orientation), &request, &width, &height)
        == IC_OK
    else { return nil }
    return (Int(width), Int(height))
  }

  /// `#rrggbb`.
  public var colourHex: String {
    let digits = Array("0123456789abcdef")
    return "#" + (0..<6).map { String(digits[Int(colour >> (20 - 4 * UInt32($0)) & 15)]) }.joined()
  }

  /// The bytes a placeholder is stored as: version, colour, orientation, source size, hash.
  var encoded: [UInt8] {
    var out: [UInt8] = [1]
    for shift in stride(from: 16, through: 0, by: -8) {
      out.append(UInt8(colour >> UInt32(shift) & 255))
    }
    out.append(UInt8(clamping: orientation))
    for value in [sourceWidth, sourceHeight] {
      let clamped = UInt32(clamping: value)
      for shift in stride(from: 24, through: 0, by: -8) {
        out.append(UInt8(clamped >> UInt32(shift) & 255))
      }
    }
    out.append(UInt8(clamping: thumbHash.count))
    return out + thumbHash
  }

  /// Reads `encoded`'s bytes; nil for anything else (a stored entry is untrusted).
  init?(encoded bytes: [UInt8]) {
    guard bytes.count >= 14, bytes[0] == 1 else { return nil }
    func u32(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
    let count = Int(bytes[13])
    guard count <= 32, bytes.count == 14 + count, (1...8).contains(bytes[4]) else { return nil }
    self.init(
      thumbHash: Array(bytes[14...]),
      colour: UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3]),
      sourceWidth: u32(5), sourceHeight: u32(9), orientation: Int(bytes[4]))
  }
}
