import Foundation
import Testing

/// The shared test corpus (`../shared/corpus` beside the repository, or `$THUMBD_CORPUS`).
enum Corpus {
  /// One line of MANIFEST.tsv.
  struct Entry: Sendable, CustomTestStringConvertible {
    let path: String
    let kind: String
    let expected: String
    let dimensions: String
    let note: String

    var testDescription: String { path }

    /// Absolute path of the file.
    var url: String { Corpus.root + "/" + path }

    /// Stored width and height, when the manifest knows them.
    var storedSize: (width: Int, height: Int)? {
      let parts = dimensions.split(separator: "x")
      guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]) else { return nil }
      return (w, h)
    }

    /// EXIF orientation named in the note, 1 when none (0 is invalid and means 1 too).
    var orientation: Int {
      guard let range = note.range(of: "EXIF Orientation=") else { return 1 }
      let digit = note[range.upperBound...].prefix(1)
      let value = Int(digit) ?? 1
      return (1...8).contains(value) ? value : 1
    }

    /// Displayed (upright) size.
    var displayedSize: (width: Int, height: Int)? {
      guard let stored = storedSize else { return nil }
      return orientation >= 5 ? (stored.height, stored.width) : stored
    }
  }

  static let root: String = {
    if let override = ProcessInfo.processInfo.environment["THUMBD_CORPUS"] { return override }
    return URL(fileURLWithPath: Repository.root).deletingLastPathComponent()
      .appendingPathComponent("shared/corpus").path
  }()

  /// Every manifest entry. Fails loudly when the corpus is missing: these tests are the proof.
  static let entries: [Entry] = {
    let manifest = root + "/MANIFEST.tsv"
    guard let text = try? String(contentsOfFile: manifest, encoding: .utf8) else {
      fatalError("corpus manifest not found at \(manifest); set THUMBD_CORPUS")
    }
    return text.split(separator: "\n").dropFirst().compactMap { line in
      let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
      guard fields.count >= 7 else { return nil }
      return Entry(
        path: fields[0], kind: fields[3], expected: fields[4], dimensions: fields[5],
        note: fields[6])
    }
  }()

  static func entries(expected: String) -> [Entry] {
    entries.filter { $0.expected == expected }
  }

  static func path(_ relative: String) -> String { root + "/" + relative }

  static func bytes(_ relative: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: path(relative))))
  }
}
