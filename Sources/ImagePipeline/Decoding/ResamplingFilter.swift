import CImageCodecs

/// The kernel for the final, exact-size reduction after block averaging.
public enum ResamplingFilter: String, Sendable, Hashable, CaseIterable {
  /// The default: 0.65 of Lanczos-3 plus 0.35 of an exact area average (linear interpolation
  /// when enlarging). Sharper than Catmull-Rom and closer to an exact area average too, with
  /// a third of Lanczos-3's ringing gone (see docs/BENCHMARKS.md).
  case lanczos3Area = "lanczos3-area"
  /// Sharpest, with the most ringing.
  case lanczos3
  /// Sharp with little ringing, but softer and more aliased than the default on photos.
  case catmullRom = "catmull-rom"
  /// Exact area averaging: no sharpening, no ringing.
  case area

  var cValue: ic_filter {
    switch self {
    case .lanczos3Area: IC_FILTER_LANCZOS3_AREA
    case .lanczos3: IC_FILTER_LANCZOS3
    case .catmullRom: IC_FILTER_CATMULL_ROM
    case .area: IC_FILTER_AREA
    }
  }
}
