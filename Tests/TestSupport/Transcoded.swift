import Foundation

/// Lossless copies of corpus JPEGs in another layout, made by `jpegtran` (libjpeg-turbo-progs,
/// installed by scripts/bootstrap): the same DCT coefficients, so a progressive copy and a
/// baseline copy of one photo must decode to the same pixels.
enum Transcoded {
  /// The layout of the copy.
  enum Layout: String, Sendable {
    /// Progressive, libjpeg's standard script (DC first with successive approximation, then
    /// AC bands and refinements).
    case progressive
    /// Sequential, one scan per component set, optimised Huffman tables.
    case baseline
  }

  /// Writes a `layout` copy of `source` (a path), optionally with a restart marker every
  /// `restartBlocks` MCUs or every `restartRows` rows of MCUs, with the markers (EXIF, ICC)
  /// or without, and returns its path (in the temporary folder; the caller removes it).
  static func copy(
    of source: String, as layout: Layout, restartBlocks: Int? = nil, restartRows: Int? = nil,
    metadata: Bool = true
  ) throws -> String {
    let output = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-\(layout.rawValue)-\(UUID().uuidString.prefix(8)).jpg").path
    var arguments = [
      "-copy", metadata ? "all" : "none", layout == .progressive ? "-progressive" : "-optimize",
    ]
    if let restartBlocks { arguments += ["-restart", "\(restartBlocks)B"] }
    if let restartRows { arguments += ["-restart", "\(restartRows)"] }
    arguments += ["-outfile", output, source]
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/jpegtran")
    process.arguments = arguments
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: output])
    }
    return output
  }
}
