import Foundation
import ImagePipeline

/// Independent reference computations for image checks.
enum ImageMetrics {
  /// Peak signal-to-noise ratio over the RGB channels, in dB (infinity when identical).
  static func psnr(_ a: Bitmap, _ b: Bitmap) -> Double {
    precondition(a.width == b.width && a.height == b.height, "size mismatch")
    var squared = 0.0
    let count = a.width * a.height
    a.pixels.withUnsafeBufferPointer { pa in
      b.pixels.withUnsafeBufferPointer { pb in
        for i in 0..<count {
          for c in 0..<3 {
            let d = Double(pa[i * a.channels + c]) - Double(pb[i * b.channels + c])
            squared += d * d
          }
        }
      }
    }
    let mse = squared / Double(count * 3)
    return mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
  }

  /// One output sample's source span and overlap weights along an axis.
  private struct Span {
    let first: Int
    let weights: [Double]
  }

  /// Exact box coverage: output i covers source [i*n/m, (i+1)*n/m).
  private static func spans(source n: Int, output m: Int) -> [Span] {
    let step = Double(n) / Double(m)
    return (0..<m).map { i in
      let a = Double(i) * step
      let b = Double(i + 1) * step
      let first = Int(a.rounded(.down))
      let last = min(n - 1, Int((b - 1e-9).rounded(.down)))
      let weights = (first...last).map { k in
        (min(Double(k + 1), b) - max(Double(k), a)) / step
      }
      return Span(first: first, weights: weights)
    }
  }

  /// Exact area average to `width` x `height`, alpha premultiplied while averaging.
  static func areaAverage(_ image: Bitmap, width: Int, height: Int) -> Bitmap {
    let ch = image.channels
    let xs = spans(source: image.width, output: width)
    let ys = spans(source: image.height, output: height)
    var rows = [Double](repeating: 0, count: width * image.height * 4)
    image.pixels.withUnsafeBufferPointer { src in
      rows.withUnsafeMutableBufferPointer { dst in
        for y in 0..<image.height {
          for (i, span) in xs.enumerated() {
            var sum = (0.0, 0.0, 0.0, 0.0)
            for (k, w) in span.weights.enumerated() {
              let p = (y * image.width + span.first + k) * ch
              let alpha = ch == 4 ? Double(src[p + 3]) / 255 : 1
              sum.0 += w * Double(src[p]) * alpha
              sum.1 += w * Double(src[p + 1]) * alpha
              sum.2 += w * Double(src[p + 2]) * alpha
              sum.3 += w * alpha
            }
            let o = (y * width + i) * 4
            dst[o] = sum.0
            dst[o + 1] = sum.1
            dst[o + 2] = sum.2
            dst[o + 3] = sum.3
          }
        }
      }
    }
    var out = [UInt8](repeating: 0, count: width * height * ch)
    for (j, span) in ys.enumerated() {
      for i in 0..<width {
        var sum = (0.0, 0.0, 0.0, 0.0)
        for (k, w) in span.weights.enumerated() {
          let o = ((span.first + k) * width + i) * 4
          sum.0 += w * rows[o]
          sum.1 += w * rows[o + 1]
          sum.2 += w * rows[o + 2]
          sum.3 += w * rows[o + 3]
        }
        let o = (j * width + i) * ch
        let alpha = sum.3
        let unpremultiply = alpha > 0 ? 1 / alpha : 0
        out[o] = byte(sum.0 * unpremultiply)
        out[o + 1] = byte(sum.1 * unpremultiply)
        out[o + 2] = byte(sum.2 * unpremultiply)
        if ch == 4 { out[o + 3] = byte(alpha * 255) }
      }
    }
    return Bitmap(pixels: out, width: width, height: height, channels: ch)
  }

  private static func byte(_ v: Double) -> UInt8 {
    UInt8(max(0, min(255, v.rounded())))
  }

  /// Expected size of a `contain` thumbnail without upscaling, the way the pipeline rounds.
  static func containSize(width: Int, height: Int, box: Int) -> (width: Int, height: Int) {
    let s = min(Double(box) / Double(width), Double(box) / Double(height), 1)
    return (max(1, Int((Double(width) * s + 0.5).rounded(.down))),
      max(1, Int((Double(height) * s + 0.5).rounded(.down))))
  }
}
