import Foundation

/// Paths in this repository, from this file's own place (Tests/TestSupport/).
enum Repository {
  /// The repository's root.
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

  /// The hand-made hostile-input reproducers.
  static let hostileFixtures = root + "/Tests/ImagePipelineTests/Fixtures/hostile"
}
