import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

/// `thumbd thumbnail` on a photo library: a tree of 1,000 files from the corpus, the same
/// names at several depths, walked as a directory.
@Suite("CLI on a photo library")
struct PhotoLibraryCLITests {
  /// The tree: every file's path and what it is.
  struct Library {
    enum Kind { case image, broken, text }
    let root: String
    let files: [(path: String, kind: Kind)]

    var images: [String] { files.filter { $0.kind == .image }.map(\.path) }
    var broken: [String] { files.filter { $0.kind == .broken }.map(\.path) }
    var texts: [String] { files.filter { $0.kind == .text }.map(\.path) }
  }

  /// Small corpus images that must decode, of every format, and some that must be refused.
  static let decodable: [Corpus.Entry] = {
    let kinds = [
      "photo", "jpeg-valid", "png-valid", "webp-valid", "gif-valid", "heif-valid",
      "exif-orientation",
    ]
    let entries = (Corpus.entries + Corpus.formatEntries).filter {
      $0.expected == "decode-ok" && kinds.contains($0.kind) && size(of: $0.url) < 160_000
    }
    // Every kind present, then the rest, cut to a pool that runs in seconds.
    return Array(
      entries.sorted { $0.path < $1.path }.enumerated().filter { $0.offset % 3 == 0 }
        .map(\.element).prefix(60))
  }()

  /// Damaged files that still start like a JPEG or PNG: failures, not "not images".
  static let refused: [Corpus.Entry] = Corpus.entries(expected: "must-reject").filter {
    ["png-corrupt", "jpeg-corrupt"].contains($0.kind) && size(of: $0.url) < 20_000
      && ImageFormat.sniff(Array((try? Data(contentsOf: URL(fileURLWithPath: $0.url))) ?? Data()))
        != nil
  }

  static func size(of path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? .max
  }

  /// 1,000 files: copies (not links: each is a file of its own) named IMG_00NN with their
  /// source's extension (upper case for some, as cameras write), at depths 1 to 3, so names
  /// repeat across folders and a stem repeats within one with two extensions.
  static func makeLibrary() throws -> Library {
    let root =
      FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-library-\(UUID().uuidString.prefix(8))").path + "/photos"
    var files: [(String, Library.Kind)] = []
    for index in 0..<1000 {
      var directory = root + "/y\(2010 + index % 11)"
      if index % 3 >= 1 { directory += "/m\(index % 7)" }
      if index % 3 == 2 { directory += "/day \(index % 5)" }
      try FileManager.default.createDirectory(
        atPath: directory, withIntermediateDirectories: true)
      let stem = directory + "/IMG_" + String(format: "%04d", index % 40)
      let kind: Library.Kind =
        index % 67 == 5 ? .text : index % 71 == 3 ? .broken : .image
      switch kind {
      case .text:
        let path = stem + ".txt"
        try Data("notes for the album\n".utf8).write(to: URL(fileURLWithPath: path))
        files.append((path, kind))
      case .broken, .image:
        let pool = kind == .image ? decodable : refused
        let source = pool[index % pool.count].url
        var ext = URL(fileURLWithPath: source).pathExtension
        if index % 2 == 0 { ext = ext.uppercased() }
        let path = stem + "." + ext
        if FileManager.default.fileExists(atPath: path) { continue }
        try FileManager.default.copyItem(atPath: source, toPath: path)
        files.append((path, kind))
      }
    }
    return Library(root: root, files: files)
  }

  /// `--verbose` lines `INPUT -> OUTPUT`, input to output.
  static func outputs(_ standardError: String) -> [String: [String]] {
    var map: [String: [String]] = [:]
    for line in standardError.split(separator: "\n") {
      guard let arrow = line.range(of: " -> ") else { continue }
      map[String(line[..<arrow.lowerBound]), default: []].append(
        String(line[arrow.upperBound...]))
    }
    return map
  }

  /// The summary line's counts.
  static func summary(_ standardError: String) -> String? {
    standardError.split(separator: "\n").last { $0.hasPrefix("thumbd thumbnail: ") }
      .map(String.init)
  }

  /// The format a written file's extension names, checked against its bytes.
  static func checkFormat(_ path: String, expected: Set<ImageFormat>) throws {
    let ext = URL(fileURLWithPath: path).pathExtension
    let named = ImageFormat.allCases.first { $0.fileExtension == ext }
    let head = Array(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(64))
    #expect(named != nil && ImageFormat.sniff(head) == named, "\(path)")
    #expect(named.map(expected.contains) == true, "\(path)")
  }

  private func files(under output: String) -> [String] {
    let directory = String(output.dropLast())
    let enumerator = FileManager.default.enumerator(atPath: directory)
    var found: [String] = []
    while let name = enumerator?.nextObject() as? String {
      var isDirectory: ObjCBool = false
      let path = directory + "/" + name
      if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory),
        !isDirectory.boolValue
      {
        found.append(path)
      }
    }
    return found
  }

  @Test(
    "1,000 files, duplicate names at several depths: one output per decodable input, in the format its extension names, and a summary that counts right"
  )
  func library() async throws {
    let library = try Self.makeLibrary()
    #expect(library.files.count >= 990)
    let images = library.images
    let brokenCount = library.broken.count
    let textCount = library.texts.count
    #expect(brokenCount > 5 && textCount > 5)
    let expectedSummary =
      "\(images.count) made, \(brokenCount) failed"
    let base = URL(fileURLWithPath: library.root).deletingLastPathComponent().path
    let thumbd = ChildProcess.thumbdFastest

    // Flat: names collide across folders and get suffixes.
    let flat = base + "/flat/"
    let first = try await ChildProcess.runThumbd(
      ["thumbnail", library.root, "--size", "48x48", "-o", flat, "--verbose"], binary: thumbd)
    #expect(first.status == 1, "the broken files fail")
    let summary = try #require(Self.summary(first.standardError))
    #expect(summary.contains(": \(expectedSummary) ("), "\(summary)")
    #expect(summary.contains(", \(textCount) skipped (\(textCount) not images)"), "\(summary)")
    let flatOutputs = Self.outputs(first.standardError)
    #expect(Set(flatOutputs.keys) == Set(images))
    #expect(flatOutputs.values.allSatisfy { $0.count == 1 })
    let written = flatOutputs.values.map { $0[0] }
    #expect(Set(written).count == images.count, "two inputs wrote the same file")
    #expect(Set(files(under: flat)) == Set(written))
    for path in written {
      #expect(path.hasPrefix(flat) && !path.dropFirst(flat.count).contains("/"))
      try Self.checkFormat(path, expected: [.jpeg, .png])
    }
    for broken in library.broken {
      #expect(first.standardError.contains("\n\(broken): "), "\(broken) failed silently")
    }

    // Mirrored: the tree is kept, in WebP.
    let mirrored = base + "/mirrored/"
    let second = try await ChildProcess.runThumbd(
      [
        "thumbnail", library.root, "--size", "48x48", "-o", mirrored, "--keep-paths",
        "--format", "webp", "-v",
      ], binary: thumbd)
    #expect(second.status == 1)
    let mirroredOutputs = Self.outputs(second.standardError)
    #expect(Set(mirroredOutputs.keys) == Set(images))
    for (input, outputs) in mirroredOutputs {
      #expect(outputs.count == 1)
      // photos/y2013/m3/IMG_0007.JPG -> mirrored/photos/y2013/m3/IMG_0007[-suffix].webp
      let below = String(input.dropFirst(base.count + 1))
      let stem = String(below[..<below.lastIndex(of: ".")!])
      #expect(outputs[0].hasPrefix(mirrored + stem), "\(input) -> \(outputs[0])")
      try Self.checkFormat(outputs[0], expected: [.webp])
    }
    #expect(Set(files(under: mirrored)) == Set(mirroredOutputs.values.map { $0[0] }))

    // Resumed: nothing is made twice.
    let third = try await ChildProcess.runThumbd(
      [
        "thumbnail", library.root, "--size", "48x48", "-o", mirrored, "--keep-paths",
        "--format", "webp", "--skip-existing",
      ], binary: thumbd)
    let resumed = try #require(Self.summary(third.standardError))
    #expect(resumed.contains(": 0 made, \(brokenCount) failed ("), "\(resumed)")
    #expect(
      resumed.contains(
        ", \(images.count + textCount) skipped (\(images.count) existing, \(textCount) not images)"
      ), "\(resumed)")
    try? FileManager.default.removeItem(atPath: base)
  }
}
