#if canImport(Glibc)
  import Glibc
#endif

/// ThumbHash: a picture's rough look (colours, light, aspect ratio, alpha) in at most 25
/// bytes, after its published specification. The luminance and two colour-difference
/// channels (and alpha) are each kept as a few low-frequency cosine coefficients, 4 bits
/// each, behind a 5-byte header (6 with alpha) of averages and scales.
public enum ThumbHash {
  /// The hash of a straight-RGBA image of at most 100 x 100 pixels (larger ones are
  /// accepted but cost more; thumbd passes at most 32 x 32). Empty for an empty image.
  public static func encode(rgba: [UInt8], width: Int, height: Int) -> [UInt8] {
    guard width > 0, height > 0, rgba.count >= width * height * 4 else { return [] }
    let count = width * height
    // The average colour, weighted by alpha.
    var average = (r: 0.0, g: 0.0, b: 0.0, a: 0.0)
    for i in 0..<count {
      let alpha = Double(rgba[i * 4 + 3]) / 255
      average.r += alpha / 255 * Double(rgba[i * 4])
      average.g += alpha / 255 * Double(rgba[i * 4 + 1])
      average.b += alpha / 255 * Double(rgba[i * 4 + 2])
      average.a += alpha
    }
    if average.a > 0 {
      average.r /= average.a
      average.g /= average.a
      average.b /= average.a
    }
    let hasAlpha = average.a < Double(count)
    let limit = hasAlpha ? 5.0 : 7.0
    let longest = Double(max(width, height))
    let lx = max(1, Int((limit * Double(width) / longest).rounded()))
    let ly = max(1, Int((limit * Double(height) / longest).rounded()))
    // Luminance, yellow-blue, red-green and alpha, composited over the average colour.
    var l = [Double](repeating: 0, count: count)
    var p = l
    var q = l
    var a = l
    for i in 0..<count {
      let alpha = Double(rgba[i * 4 + 3]) / 255
      let r = average.r * (1 - alpha) + alpha / 255 * Double(rgba[i * 4])
      let g = average.g * (1 - alpha) + alpha / 255 * Double(rgba[i * 4 + 1])
      let b = average.b * (1 - alpha) + alpha / 255 * Double(rgba[i * 4 + 2])
      l[i] = (r + g + b) / 3
      p[i] = (r + g) / 2 - b
      q[i] = r - g
      a[i] = alpha
    }
    let lChannel = channel(l, width, height, max(3, lx), max(3, ly))
    let pChannel = channel(p, width, height, 3, 3)
    let qChannel = channel(q, width, height, 3, 3)
    let aChannel = hasAlpha ? channel(a, width, height, 5, 5) : nil
    let isLandscape = width > height
    let header24 =
      field(63 * lChannel.dc, 63) | field(31.5 + 31.5 * pChannel.dc, 63) << 6
      | field(31.5 + 31.5 * qChannel.dc, 63) << 12 | field(31 * lChannel.scale, 31) << 18
      | (hasAlpha ? 1 << 23 : 0)
    let header16 =
      UInt32(isLandscape ? ly : lx) | field(63 * pChannel.scale, 63) << 3
      | field(63 * qChannel.scale, 63) << 9 | (isLandscape ? 1 << 15 : 0)
    var hash: [UInt8] = [
      UInt8(header24 & 255), UInt8(header24 >> 8 & 255), UInt8(header24 >> 16),
      UInt8(header16 & 255), UInt8(header16 >> 8),
    ]
    if let aChannel {
      hash.append(UInt8(field(15 * aChannel.dc, 15) | field(15 * aChannel.scale, 15) << 4))
    }
    var odd = false
    for coefficients in [lChannel.ac, pChannel.ac, qChannel.ac] + (aChannel.map { [$0.ac] } ?? []) {
      for value in coefficients {
        let nibble = UInt8(field(15 * value, 15))
        if odd {
          hash[hash.count - 1] |= nibble << 4
        } else {
          hash.append(nibble)
        }
        odd.toggle()
      }
    }
    return hash
  }

  /// `value` rounded into a field of `maximum` (rounding can step just past either end).
  private static func field(_ value: Double, _ maximum: UInt32) -> UInt32 {
    guard value.isFinite else { return 0 }
    return UInt32(min(Double(maximum), max(0, value.rounded())))
  }

  /// One channel as its DC value, AC coefficients in 0...1 (relative to `scale`) and the
  /// scale, over the triangle of frequencies `cx * ny < nx * (ny - cy)`.
  private static func channel(
    _ values: [Double], _ width: Int, _ height: Int, _ nx: Int, _ ny: Int
  ) -> (dc: Double, ac: [Double], scale: Double) {
    var dc = 0.0
    var ac: [Double] = []
    var scale = 0.0
    var fx = [Double](repeating: 0, count: width)
    for cy in 0..<ny {
      var cx = 0
      while cx * ny < nx * (ny - cy) {
        for x in 0..<width {
          fx[x] = cos(Double.pi / Double(width) * Double(cx) * (Double(x) + 0.5))
        }
        var f = 0.0
        for y in 0..<height {
          let fy = cos(Double.pi / Double(height) * Double(cy) * (Double(y) + 0.5))
          var row = 0.0
          for x in 0..<width { row += values[x + y * width] * fx[x] }
          f += row * fy
        }
        f /= Double(width * height)
        if cx > 0 || cy > 0 {
          ac.append(f)
          scale = max(scale, abs(f))
        } else {
          dc = f
        }
        cx += 1
      }
    }
    if scale > 0 {
      for i in ac.indices { ac[i] = 0.5 + 0.5 / scale * ac[i] }
    }
    return (dc, ac, scale)
  }

  /// The colour most of the picture is: the fullest bucket of a 4-bit-per-channel
  /// histogram of opaque-enough pixels, averaged; the plain average when every pixel is
  /// nearly transparent. RGB, 0...255.
  public static func dominantColour(rgba: [UInt8], width: Int, height: Int) -> (
    UInt8, UInt8, UInt8
  ) {
    let count = min(width * height, rgba.count / 4)
    guard count > 0 else { return (0, 0, 0) }
    var buckets = [(n: Int, r: Int, g: Int, b: Int)](repeating: (0, 0, 0, 0), count: 4096)
    var all = (r: 0, g: 0, b: 0)
    for i in 0..<count {
      let (r, g, b, a) = (
        Int(rgba[i * 4]), Int(rgba[i * 4 + 1]), Int(rgba[i * 4 + 2]), Int(rgba[i * 4 + 3])
      )
      all = (all.r + r, all.g + g, all.b + b)
      guard a >= 128 else { continue }
      let key = (r >> 4) << 8 | (g >> 4) << 4 | b >> 4
      buckets[key].n += 1
      buckets[key].r += r
      buckets[key].g += g
      buckets[key].b += b
    }
    guard let best = buckets.max(by: { $0.n < $1.n }), best.n > 0 else {
      return (UInt8(all.r / count), UInt8(all.g / count), UInt8(all.b / count))
    }
    return (UInt8(best.r / best.n), UInt8(best.g / best.n), UInt8(best.b / best.n))
  }
}
