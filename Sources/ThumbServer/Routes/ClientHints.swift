/// Client hints (`client_hints`): a browser's `Sec-CH-DPR`/`DPR` and `Sec-CH-Width`/`Width`
/// size a request that names no size (no `w`, `h` or `dpr`), so `srcset` need not be written
/// by hand: one URL, and each browser gets the width its layout and screen need.
///
/// Hints are rounded before they reach the spec, and so the cache key, so that cycling them
/// cannot make one source an endless source of misses (issue 52: 152-228 variants of one
/// signed path, where 64 are kept, and no hit). A width hint is a width in device pixels,
/// whatever the DPR (the DPR only changes how the same pixels are named), rounded up to the
/// next of 2^n, 1.25·2^n and 1.5·2^n from 64 (at most `maxWidth`); a DPR alone is a scale of
/// 1.5, 2, 3 or 4 (at most `maxDPR`; 1 is no scale). One source then has at most
/// `variantsPerFormat` hinted sizes per format, which `max_variants_per_source` keeps, so after
/// one pass they are hits.
public struct ClientHints: Sendable, Hashable {
  /// The widest image, in device pixels, a `Width` hint may ask for.
  public let maxWidth: Int
  /// The largest DPR a hint may ask for.
  public let maxDPR: Double
  /// The widths (device pixels) a `Width` hint is rounded up to: 64, 80, 96, 128, 160, ...,
  /// then `maxWidth` itself. Made once, not per request.
  public let widthSteps: [Int]
  /// The DPRs a hint is rounded up to, at most `maxDPR`.
  private let allowedDPRs: [Double]

  /// Hints up to `maxWidth` device pixels and a DPR of `maxDPR`.
  public init(maxWidth: Int = 2048, maxDPR: Double = 3) {
    self.maxWidth = maxWidth
    self.maxDPR = maxDPR
    var steps: [Int] = []
    var octave = Self.smallestWidth
    while octave < maxWidth {
      for step in [octave, octave + octave / 4, octave + octave / 2] where step < maxWidth {
        steps.append(step)
      }
      octave *= 2
    }
    widthSteps = steps + [maxWidth]
    allowedDPRs = Self.dprSteps.filter { $0 <= maxDPR }
  }

  /// The smallest width a hint is rounded up to, in device pixels.
  static let smallestWidth = 64
  /// Output formats one hinted path can negotiate: AVIF, WebP, and JPEG or PNG.
  public static let formatsPerPath = 3

  /// The request headers `apply` reads (for `Route.reads`).
  static let reads: Set<String> = ["sec-ch-width", "width", "sec-ch-dpr", "dpr"]
  /// `Accept-CH` on responses: the hints thumbd reads.
  static let acceptCH = "Sec-CH-DPR, Sec-CH-Width, DPR, Width"
  /// Headers a response varies on when the DPR was left to the hint, and when the width was.
  static let dprHeaders = ["Sec-CH-DPR", "DPR"]
  static let widthHeaders = ["Sec-CH-Width", "Width"]
  /// The DPRs a hint is rounded up to.
  static let dprSteps: [Double] = [1, 1.5, 2, 3, 4]

  /// Sizes a request that names no size (no width, height or scale) from the hints
  /// `request` carries, rounded; returns the headers consulted (a shared cache must vary on
  /// them even when a hint was absent, since its presence would have changed the image).
  ///
  /// A request that names a size is taken as exact: a `srcset` candidate's `w:400` already
  /// means 400 device pixels, and applying the DPR again would double it.
  func apply(to options: inout ImageOptions, from request: HTTPRequest) -> [String] {
    guard options.width == 0 && options.height == 0 && options.scale == nil else { return [] }
    if let text = request.header("sec-ch-width") ?? request.header("width"),
      let width = Int(text.trimmingWhitespace()), width > 0
    {
      // Device pixels: the same image at every DPR, one entry.
      options.width = roundedWidth(width)
    } else if let text = request.header("sec-ch-dpr") ?? request.header("dpr"),
      let value = Double(text.trimmingWhitespace()), value.isFinite, value > 0
    {
      let dpr = roundedDPR(value)
      options.scale = dpr == 1 ? nil : dpr
    }
    return Self.dprHeaders + Self.widthHeaders
  }

  /// The most hinted sizes one source can have per output format: every width step, and
  /// every scale a DPR alone gives.
  public var variantsPerFormat: Int { widthSteps.count + allowedDPRs.filter { $0 > 1 }.count }

  /// `dpr` rounded up to a step, at most `maxDPR`'s step.
  func roundedDPR(_ dpr: Double) -> Double {
    allowedDPRs.first { $0 >= dpr } ?? allowedDPRs.last ?? 1
  }

  /// `width` device pixels rounded up to a step, at most `maxWidth`.
  func roundedWidth(_ width: Int) -> Int {
    widthSteps.first { $0 >= width } ?? maxWidth
  }
}
