import Foundation
import ImagePipeline

/// Independent reference computations for image checks.
enum ImageMetrics {
  /// A pixel rectangle, as fractions of the image size, left out of a comparison.
  struct Exclusion {
    let x: ClosedRange<Double>
    let y: ClosedRange<Double>

    func contains(_ px: Int, _ py: Int, width: Int, height: Int) -> Bool {
      x.contains((Double(px) + 0.5) / Double(width))
        && y.contains((Double(py) + 0.5) / Double(height))
    }
  }

  /// The picture a viewer sees: RGBA composited over a grey background (RGB unchanged). The
  /// colour of a fully transparent pixel is invisible, so comparisons of RGBA images go
  /// through this.
  static func flattened(_ image: Bitmap, background: Double = 128) -> Bitmap {
    guard image.channels == 4 else { return image }
    var out = [UInt8](repeating: 0, count: image.width * image.height * 3)
    for i in 0..<(image.width * image.height) {
      let alpha = Double(image.pixels[i * 4 + 3]) / 255
      for c in 0..<3 {
        out[i * 3 + c] = byte(Double(image.pixels[i * 4 + c]) * alpha + background * (1 - alpha))
      }
    }
    return Bitmap(pixels: out, width: image.width, height: image.height, channels: 3)
  }

  /// Peak signal-to-noise ratio over the RGB channels, in dB (infinity when identical).
  static func psnr(_ a: Bitmap, _ b: Bitmap, excluding exclusion: Exclusion? = nil) -> Double {
    precondition(a.width == b.width && a.height == b.height, "size mismatch")
    var squared = 0.0
    var count = 0
    a.pixels.withUnsafeBufferPointer { pa in
      b.pixels.withUnsafeBufferPointer { pb in
        for i in 0..<(a.width * a.height) {
          if let exclusion,
            exclusion.contains(i % a.width, i / a.width, width: a.width, height: a.height)
          {
            continue
          }
          count += 1
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

  /// The largest and the mean difference of any sample between two bitmaps' samples, over
  /// the shorter of the two. Through buffer pointers: a `zip` of two full-size pictures
  /// spent over a minute in the runtime's generic calls in a debug build.
  static func sampleDifference(_ a: Bitmap, _ b: Bitmap) -> (worst: Int, mean: Double) {
    let count = min(a.pixels.count, b.pixels.count)
    var worst = 0
    var total = 0
    a.pixels.withUnsafeBufferPointer { pa in
      b.pixels.withUnsafeBufferPointer { pb in
        for i in 0..<count {
          let d = abs(Int(pa[i]) - Int(pb[i]))
          if d > worst { worst = d }
          total += d
        }
      }
    }
    return (worst, Double(total) / Double(max(1, count)))
  }

  /// Each output sample's source span along an axis: output i covers `count[i]` samples from
  /// `first[i]`, with weights `weights[offset[i]...]`. Flat arrays read through buffer
  /// pointers: the debug build's generic iteration made the reference minutes long.
  private struct Spans {
    var first: [Int] = []
    var offset: [Int] = []
    var count: [Int] = []
    var weights: [Double] = []
  }

  /// Exact box coverage: output i covers source [i*n/m, (i+1)*n/m).
  private static func spans(source n: Int, output m: Int) -> Spans {
    let step = Double(n) / Double(m)
    var spans = Spans()
    for i in 0..<m {
      let a = Double(i) * step
      let b = Double(i + 1) * step
      let first = Int(a.rounded(.down))
      let last = min(n - 1, Int((b - 1e-9).rounded(.down)))
      spans.first.append(first)
      spans.offset.append(spans.weights.count)
      spans.count.append(last - first + 1)
      for k in first...last {
        spans.weights.append((min(Double(k + 1), b) - max(Double(k), a)) / step)
      }
    }
    return spans
  }

  /// Exact area average to `width` x `height`. With `premultiplied` false, colour is averaged
  /// ignoring alpha: the classic dark-fringe bug, kept to show the checks would catch it.
  static func areaAverage(
    _ image: Bitmap, width: Int, height: Int, premultiplied: Bool = true
  ) -> Bitmap {
    let ch = image.channels
    let xs = spans(source: image.width, output: width)
    let ys = spans(source: image.height, output: height)
    var rows = [Double](repeating: 0, count: width * image.height * 4)
    image.pixels.withUnsafeBufferPointer { src in
      rows.withUnsafeMutableBufferPointer { dst in
        xs.weights.withUnsafeBufferPointer { weights in
          for y in 0..<image.height {
            for i in 0..<width {
              var sum = (0.0, 0.0, 0.0, 0.0)
              let start = xs.offset[i]
              for k in 0..<xs.count[i] {
                let w = weights[start + k]
                let p = (y * image.width + xs.first[i] + k) * ch
                let alpha = ch == 4 ? Double(src[p + 3]) / 255 : 1
                let weight = premultiplied ? alpha : 1
                sum.0 += w * Double(src[p]) * weight
                sum.1 += w * Double(src[p + 1]) * weight
                sum.2 += w * Double(src[p + 2]) * weight
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
    }
    var out = [UInt8](repeating: 0, count: width * height * ch)
    rows.withUnsafeBufferPointer { rows in
      ys.weights.withUnsafeBufferPointer { weights in
        for j in 0..<height {
          for i in 0..<width {
            var sum = (0.0, 0.0, 0.0, 0.0)
            let start = ys.offset[j]
            for k in 0..<ys.count[j] {
              let w = weights[start + k]
              let o = ((ys.first[j] + k) * width + i) * 4
              sum.0 += w * rows[o]
              sum.1 += w * rows[o + 1]
              sum.2 += w * rows[o + 2]
              sum.3 += w * rows[o + 3]
            }
            let o = (j * width + i) * ch
            let alpha = sum.3
            let unpremultiply = premultiplied ? (alpha > 0 ? 1 / alpha : 0) : 1
            out[o] = byte(sum.0 * unpremultiply)
            out[o + 1] = byte(sum.1 * unpremultiply)
            out[o + 2] = byte(sum.2 * unpremultiply)
            if ch == 4 { out[o + 3] = byte(alpha * 255) }
          }
        }
      }
    }
    return Bitmap(pixels: out, width: width, height: height, channels: ch)
  }

  /// How much darker `image` is than `reference` along transparency edges: pixels the reference
  /// shows partly transparent (alpha 64...250), where averaging with transparent black would
  /// pull the colour down. The largest per-pixel drop of the mean of R, G and B. Fully opaque
  /// pixels are left out: there, a sharp kernel differs from an area average by design.
  static func worstDarkening(_ image: Bitmap, reference: Bitmap) -> Double {
    precondition(image.channels == 4 && reference.channels == 4, "RGBA expected")
    var worst = 0.0
    for i in 0..<(image.width * image.height) where (64...250).contains(reference.pixels[i * 4 + 3])
    {
      var drop = 0.0
      for c in 0..<3 {
        drop += Double(reference.pixels[i * 4 + c]) - Double(image.pixels[i * 4 + c])
      }
      worst = max(worst, drop / 3)
    }
    return worst
  }

  private static func byte(_ v: Double) -> UInt8 {
    UInt8(max(0, min(255, v.rounded())))
  }

  /// Expected size of a `contain` thumbnail without upscaling, the way the pipeline rounds.
  static func containSize(width: Int, height: Int, box: Int) -> (width: Int, height: Int) {
    let s = min(Double(box) / Double(width), Double(box) / Double(height), 1)
    return (
      max(1, Int((Double(width) * s + 0.5).rounded(.down))),
      max(1, Int((Double(height) * s + 0.5).rounded(.down)))
    )
  }
}
