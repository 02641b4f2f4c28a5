import CImageCodecs
import ThumbSystem

/// What happens to a source's embedded colour profile.
public enum ColourMode: String, Sendable, Hashable, CaseIterable, NamedChoice {
  /// Converted to sRGB through the profile (relative colorimetric); the output is untagged,
  /// which every browser and viewer takes as sRGB. The default.
  case srgb
  /// Pixels left as they are and the profile copied into the output. Only RGB ICC profiles
  /// can travel with an RGB thumbnail: grey and CMYK profiles, and PNG gAMA/cHRM or HEIF nclx
  /// descriptions, still convert to sRGB.
  case keep

  var cValue: ic_colour_mode {
    switch self {
    case .srgb: IC_COLOUR_SRGB
    case .keep: IC_COLOUR_KEEP
    }
  }
}

/// What the colour step did with a source's profile.
public enum ProfileOutcome: String, Sendable, Hashable, CaseIterable {
  /// No profile, or one that means sRGB: nothing to do.
  case none
  /// Converted to sRGB through the embedded profile.
  case converted
  /// Copied into the output (`ColourMode.keep`).
  case kept
  /// Present but damaged: ignored, the image taken as sRGB.
  case broken
  /// Larger than `DecodingLimits.maxProfileBytes`: ignored without being buffered.
  case oversized
  /// Readable but not linkable to sRGB (wrong colour space, lcms2 refused): ignored.
  case unlinkable
  /// A CMYK JPEG without a usable profile of its own, through the standard CMYK profile.
  case standardCMYK = "standard_cmyk"

  init(_ value: ic_profile_outcome) {
    switch value {
    case IC_PROFILE_CONVERTED: self = .converted
    case IC_PROFILE_KEPT: self = .kept
    case IC_PROFILE_BROKEN: self = .broken
    case IC_PROFILE_OVERSIZED: self = .oversized
    case IC_PROFILE_UNLINKABLE: self = .unlinkable
    case IC_PROFILE_STANDARD_CMYK: self = .standardCMYK
    default: self = .none
    }
  }

  /// Whether a profile was there and had to be ignored (counted as a warning).
  public var isWarning: Bool { self == .broken || self == .oversized || self == .unlinkable }
}

/// The process-wide colour settings and the transform cache's counters.
public enum ColourManagement {
  /// Where Debian's libgs-common puts a standard CMYK (SWOP-like) press profile.
  public static let defaultCMYKProfilePath = "/usr/share/color/icc/ghostscript/default_cmyk.icc"

  /// Loads the standard CMYK profile for CMYK JPEGs without a usable profile of their own.
  /// `nil` (or a file that is missing or not a CMYK profile) leaves the fixed formula. Returns
  /// whether the profile was taken. At most 16 MiB is read.
  @discardableResult
  public static func useStandardCMYKProfile(contentsOf path: String?) -> Bool {
    // The default goes first, so it can never load later over what was asked for here.
    _ = defaultsLoaded
    return load(path)
  }

  /// Loads the default CMYK profile once, for thumbnailers that were never told otherwise.
  static let defaultsLoaded: Bool = load(defaultCMYKProfilePath)

  private static func load(_ path: String?) -> Bool {
    guard let path, let bytes = SystemFiles.read(path, limit: 16 << 20) else {
      _ = ic_colour_set_cmyk_profile(nil, 0)
      return false
    }
    return bytes.withUnsafeBufferPointer {
      ic_colour_set_cmyk_profile($0.baseAddress, $0.count) != 0
    }
  }

  /// The transform cache's counters.
  public struct Stats: Sendable, Hashable {
    /// Transforms built (a profile parsed and linked).
    public var builds: Int
    /// Requests served by a cached transform.
    public var hits: Int
    /// Transforms held now.
    public var entries: Int
    /// Bytes lcms2 (and the tables) hold for them.
    public var bytes: Int
    /// Transforms built that run as curve-and-matrix tables instead of through lcms2.
    public var tables: Int
  }

  /// Runs `body` (synchronous, so on this thread) with lcms2's transforms in place of the
  /// curve-and-matrix tables, to compare the two.
  static func withoutTables<T>(_ body: () throws -> T) rethrows -> T {
    ic_colour_set_tables(0)
    defer { ic_colour_set_tables(1) }
    return try body()
  }

  /// Reads the transform cache's counters.
  public static func stats() -> Stats {
    var stats = ic_colour_stats()
    ic_colour_stats_get(&stats)
    return Stats(
      builds: Int(clamping: stats.builds), hits: Int(clamping: stats.hits),
      entries: Int(stats.entries), bytes: Int(clamping: stats.bytes),
      tables: Int(clamping: stats.tables))
  }
}
