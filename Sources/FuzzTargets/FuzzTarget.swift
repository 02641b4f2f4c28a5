/// One fuzz target: a parser fed arbitrary bytes, and the invariants it must keep for every
/// input. A target returns normally or stops the process with the invariant that failed
/// (libFuzzer then keeps the input); crashes, hangs and unbounded allocation are caught by
/// libFuzzer and the sanitizers around it. `thumbfuzz` runs them; the tests replay the kept
/// inputs in `Tests/Fuzz/<name>/`.
public struct FuzzTarget: Sendable {
  /// The name on the command line and of the input directory, e.g. `http-request`.
  public let name: String
  /// What is fuzzed and what is checked, for `thumbfuzz list`.
  public let covers: String
  /// The longest input worth trying (libFuzzer's `-max_len`).
  public let maxLength: Int
  /// File name extensions of the shared corpus's files that seed it (a decoder's formats'),
  /// none for the others.
  public let seedExtensions: [String]
  /// Runs one input.
  public let run: @Sendable ([UInt8]) -> Void

  /// A target.
  init(
    name: String, covers: String, maxLength: Int, seedExtensions: [String] = [],
    run: @escaping @Sendable ([UInt8]) -> Void
  ) {
    (self.name, self.covers, self.maxLength) = (name, covers, maxLength)
    (self.seedExtensions, self.run) = (seedExtensions, run)
  }

  /// Every target, in `thumbfuzz list` order; the decoders come from `SourceFormat`.
  public static let all: [FuzzTarget] =
    [
      httpRequest, thumbnailQuery, imgproxyPath, sessionFrames, json, config, sourceURL,
      responseHead, ipAddress, diskEntry, desktopEntry, thumbnailerEntry, mediaTypeGlobs,
      freshness,
    ] + decoders + [colourProfile, videoFrame, geometry]

  /// The target called `name`.
  public static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}

/// Stops the process when an invariant does not hold for the input being run.
func require(
  _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
  file: StaticString = #fileID, line: UInt = #line
) {
  if !condition() { fatalError("invariant failed: \(message())", file: file, line: line) }
}

/// The input cut into pieces for a streaming parser: one byte at a time for short inputs
/// (every boundary tried), else three pieces at a third and two thirds.
func pieces(of bytes: [UInt8]) -> [ArraySlice<UInt8>] {
  if bytes.count <= 4096 { return bytes.indices.map { bytes[$0...$0] } }
  let third = bytes.count / 3
  return [bytes[..<third], bytes[third..<2 * third], bytes[(2 * third)...]]
}

/// The input as text, as a parser taking a `String` sees what a client sent.
func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
