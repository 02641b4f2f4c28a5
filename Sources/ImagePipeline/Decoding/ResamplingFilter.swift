import CImageCodecs

/// The kernel for the final, exact-size reduction after block averaging.
public enum ResamplingFilter: String, Sendable, Hashable, CaseIterable {
  /// Sharpest; the default.
  case lanczos3
  /// A little softer, fewer ringing artefacts.
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
