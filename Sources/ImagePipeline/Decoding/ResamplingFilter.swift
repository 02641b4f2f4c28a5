import CImageCodecs

/// The kernel for the final, exact-size reduction after block averaging.
public enum ResamplingFilter: String, Sendable, Hashable, CaseIterable {
  /// Sharpest, with the most ringing.
  case lanczos3
  /// Sharp with little ringing; the default. Closest of the two sharp kernels to an exact
  /// area average on photos (see docs/BENCHMARKS.md).
  case catmullRom = "catmull-rom"
  /// Exact area averaging: no sharpening, no ringing.
  case area

  var cValue: ic_filter {
    switch self {
    case .lanczos3: IC_FILTER_LANCZOS3
    case .catmullRom: IC_FILTER_CATMULL_ROM
    case .area: IC_FILTER_AREA
    }
  }
}
