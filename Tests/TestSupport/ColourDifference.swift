import Foundation
import ImagePipeline

/// CIEDE2000 colour differences between two sRGB bitmaps of the same size.
enum ColourDifference {
  /// Mean and 99th percentile of CIEDE2000 over the pixels both show (alpha >= 128 in `a`
  /// when it has alpha).
  static func ciede2000(_ a: Bitmap, _ b: Bitmap) -> (mean: Double, p99: Double) {
    precondition(a.width == b.width && a.height == b.height)
    var differences: [Double] = []
    differences.reserveCapacity(a.width * a.height)
    for i in 0..<(a.width * a.height) {
      if a.channels == 4 && a.pixels[i * 4 + 3] < 128 { continue }
      let p = rgb(a, i)
      let q = rgb(b, i)
      differences.append(deltaE(lab(p), lab(q)))
    }
    guard !differences.isEmpty else { return (0, 0) }
    differences.sort()
    let mean = differences.reduce(0, +) / Double(differences.count)
    let p99 = differences[min(differences.count - 1, Int(Double(differences.count) * 0.99))]
    return (mean, p99)
  }

  private static func rgb(_ image: Bitmap, _ i: Int) -> (Double, Double, Double) {
    let o = i * image.channels
    return (Double(image.pixels[o]), Double(image.pixels[o + 1]), Double(image.pixels[o + 2]))
  }

  /// sRGB (D65) to CIE L*a*b* (D65 white).
  static func lab(_ rgb: (Double, Double, Double)) -> (Double, Double, Double) {
    func linear(_ v: Double) -> Double {
      let c = v / 255
      return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4)
    }
    let (r, g, b) = (linear(rgb.0), linear(rgb.1), linear(rgb.2))
    let x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    let y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    let z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883
    func f(_ t: Double) -> Double {
      t > 216.0 / 24389 ? cbrt(t) : t * 841.0 / 108 + 4.0 / 29
    }
    return (116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z)))
  }

  /// CIEDE2000 (kL = kC = kH = 1).
  static func deltaE(_ p: (Double, Double, Double), _ q: (Double, Double, Double)) -> Double {
    func degrees(_ r: Double) -> Double { r * 180 / .pi }
    func radians(_ d: Double) -> Double { d * .pi / 180 }
    let c1 = (p.1 * p.1 + p.2 * p.2).squareRoot()
    let c2 = (q.1 * q.1 + q.2 * q.2).squareRoot()
    let cm7 = pow((c1 + c2) / 2, 7)
    let g = 0.5 * (1 - (cm7 / (cm7 + pow(25, 7))).squareRoot())
    let a1 = (1 + g) * p.1
    let a2 = (1 + g) * q.1
    let c1p = (a1 * a1 + p.2 * p.2).squareRoot()
    let c2p = (a2 * a2 + q.2 * q.2).squareRoot()
    func hue(_ b: Double, _ a: Double) -> Double {
      if a == 0 && b == 0 { return 0 }
      let h = degrees(atan2(b, a))
      return h < 0 ? h + 360 : h
    }
    let h1 = hue(p.2, a1)
    let h2 = hue(q.2, a2)
    let dL = q.0 - p.0
    let dC = c2p - c1p
    var dh = h2 - h1
    if c1p * c2p == 0 {
      dh = 0
    } else if dh > 180 {
      dh -= 360
    } else if dh < -180 {
      dh += 360
    }
    let dH = 2 * (c1p * c2p).squareRoot() * sin(radians(dh / 2))
    let lm = (p.0 + q.0) / 2
    let cmp = (c1p + c2p) / 2
    var hm = h1 + h2
    if c1p * c2p != 0 {
      hm = abs(h1 - h2) > 180 ? (hm < 360 ? (hm + 360) / 2 : (hm - 360) / 2) : hm / 2
    }
    let t =
      1 - 0.17 * cos(radians(hm - 30)) + 0.24 * cos(radians(2 * hm))
      + 0.32 * cos(radians(3 * hm + 6)) - 0.20 * cos(radians(4 * hm - 63))
    let dTheta = 30 * exp(-pow((hm - 275) / 25, 2))
    let cmp7 = pow(cmp, 7)
    let rc = 2 * (cmp7 / (cmp7 + pow(25, 7))).squareRoot()
    let sl = 1 + 0.015 * pow(lm - 50, 2) / (20 + pow(lm - 50, 2)).squareRoot()
    let sc = 1 + 0.045 * cmp
    let sh = 1 + 0.015 * cmp * t
    let rt = -sin(radians(2 * dTheta)) * rc
    let l = dL / sl
    let c = dC / sc
    let h = dH / sh
    return (l * l + c * c + h * h + rt * c * h).squareRoot()
  }
}
