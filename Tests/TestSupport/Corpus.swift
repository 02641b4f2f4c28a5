import Foundation
import ImagePipeline
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
    /// The manifest's orientation column (MANIFEST-formats2.tsv has one), nil when the note
    /// says.
    var orientationColumn: Int? = nil
    /// Whether `dimensions` is the displayed size already (MANIFEST-formats2.tsv's columns are).
    var dimensionsDisplayed = false

    var testDescription: String { path }

    /// Absolute path of the file.
    var url: String { Corpus.root + "/" + path }

    /// Stored width and height, when the manifest knows them.
    var storedSize: (width: Int, height: Int)? {
      let parts = dimensions.split(separator: "x")
      guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]) else { return nil }
      return (w, h)
    }

    /// EXIF orientation named in the note and applied, 1 when none (0 is invalid and means
    /// 1 too). MANIFEST.tsv writes "EXIF Orientation=N"; MANIFEST-formats.tsv writes
    /// "EXIF chunk, Orientation N" for WebP, and a HEIF's "EXIF Orientation N" is not applied
    /// (its irot/imir take precedence, and the note gives the displayed size).
    var orientation: Int {
      if let orientationColumn {
        return (1...8).contains(orientationColumn) ? orientationColumn : 1
      }
      for marker in ["EXIF Orientation=", "EXIF chunk, Orientation "] {
        guard let range = note.range(of: marker) else { continue }
        let value = Int(note[range.upperBound...].prefix(1)) ?? 1
        return (1...8).contains(value) ? value : 1
      }
      return 1
    }

    /// Displayed (upright) size: the note's "displayed WxH" when it gives one.
    var displayedSize: (width: Int, height: Int)? {
      if dimensionsDisplayed { return storedSize }
      if let range = note.range(of: "displayed ") {
        let parts = note[range.upperBound...].prefix { $0.isNumber || $0 == "x" }
          .split(separator: "x")
        if parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]) { return (w, h) }
      }
      guard let stored = storedSize else { return nil }
      return orientation >= 5 ? (stored.height, stored.width) : stored
    }
  }

  static let root: String = {
    if let override = ProcessInfo.processInfo.environment["THUMBD_CORPUS"] { return override }
    return URL(fileURLWithPath: Repository.root).deletingLastPathComponent()
      .appendingPathComponent("shared/corpus").path
  }()

  /// Every entry of MANIFEST.tsv (JPEG and PNG). Fails loudly when the corpus is missing:
  /// these tests are the proof.
  static let entries: [Entry] = load("MANIFEST.tsv")

  /// Every entry of MANIFEST-formats.tsv (WebP, GIF, HEIC/AVIF and ICC-tagged images).
  static let formatEntries: [Entry] = load("MANIFEST-formats.tsv")

  /// Every entry of MANIFEST-formats2.tsv (TIFF, BMP/ICO, JXL, RAW, SVG, PDF, video), whose
  /// columns are path, kind, expect, width, height (displayed, orientation applied),
  /// orientation, source and notes.
  static let formats2Entries: [Entry] = {
    let manifest = root + "/MANIFEST-formats2.tsv"
    guard let text = try? String(contentsOfFile: manifest, encoding: .utf8) else {
      fatalError("corpus manifest not found at \(manifest); set THUMBD_CORPUS")
    }
    return text.split(separator: "\n").dropFirst().compactMap { line in
      let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
      guard fields.count >= 8 else { return nil }
      return Entry(
        path: fields[0], kind: fields[1], expected: fields[2],
        dimensions: "\(fields[3])x\(fields[4])", note: fields[7],
        orientationColumn: Int(fields[5]), dimensionsDisplayed: true)
    }
  }()

  /// The MANIFEST-formats2.tsv entries of the kinds thumbd decodes itself (a kind named by
  /// one of its formats' file extensions: `bmp-valid`, `ico-corrupt`...); the others are the
  /// desktop's installed thumbnailers' to make.
  static func nativeFormats2Entries(expected: String) -> [Entry] {
    formats2Entries.filter { entry in
      entry.expected == expected && nativeKinds.contains(String(entry.kind.prefix { $0 != "-" }))
    }
  }

  /// The kinds' first words that name a format thumbd reads (an extension, or its name:
  /// `raw`).
  static let nativeKinds: Set<String> = Set(
    SourceFormat.allCases.flatMap(\.fileExtensions)
      + SourceFormat.allCases.map { $0.displayName.lowercased() })

  private static func load(_ name: String) -> [Entry] {
    let manifest = root + "/" + name
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
  }

  static func entries(expected: String) -> [Entry] {
    entries.filter { $0.expected == expected }
  }

  static func formatEntries(expected: String) -> [Entry] {
    formatEntries.filter { $0.expected == expected }
  }

  /// The WebP, GIF and HEIF images that decode and are large enough to be photographs
  /// (0.25 MP or more), whatever their content: the quality and memory checks' set.
  static let formatPhotos: [Entry] = formatEntries(expected: "decode-ok").filter {
    ["webp-valid", "gif-valid", "heif-valid"].contains($0.kind)
      && ($0.storedSize.map { $0.width * $0.height >= 250_000 } ?? false)
  }

  static func path(_ relative: String) -> String { root + "/" + relative }

  static func bytes(_ relative: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: path(relative))))
  }
}
