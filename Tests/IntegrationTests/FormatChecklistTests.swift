import Foundation
import ImagePipeline
import Testing

@testable import FuzzTargets
@testable import TestSupport

/// Every format thumbd reads has what a format needs (docs/ARCHITECTURE.md, "Where things go"):
/// a row in the codec table, a fuzz target with seeds, corpus files it must decode, large ones
/// for the memory estimates, and its place in the docs. A format added without one of them
/// fails here, naming what is missing, as a config option without its docs fails ConfigTests.
@Suite("Format checklist")
struct FormatChecklistTests {
  /// The corpus's decode-ok files of `format`, judged by their bytes.
  static func corpusFiles(of format: SourceFormat) -> [Corpus.Entry] {
    (Corpus.entries(expected: "decode-ok") + Corpus.formatEntries(expected: "decode-ok")
      + Corpus.formats2Entries.filter { $0.expected == "decode-ok" }).filter {
        entry in (try? SourceFormat.sniff(Corpus.bytes(entry.path)[...].prefix(32))) == format
      }
  }

  @Test(
    "every format has its codec row, fuzz target, seeds, corpus files and docs",
    arguments: SourceFormat.allCases)
  func complete(format: SourceFormat) throws {
    // The codec table names it (codecs.c's decoders), with its traits.
    #expect(format.displayName != "unknown", "\(format): no row in codecs.c's decoder table")
    #expect(format.mediaType.hasPrefix("image/"), "\(format): no media type in its codec row")
    #expect(!format.fileExtensions.isEmpty, "\(format): no extensions in its codec row")
    // A fuzz target covers it, with seeds of its own and the corpus's files by extension.
    let target = try #require(
      FuzzTarget.named(format.fuzzTarget.name), "\(format): no fuzz target")
    #expect(target.covers.contains(format.displayName), "\(target.name) does not cover \(format)")
    #expect(format.fileExtensions.allSatisfy { target.seedExtensions.contains($0) })
    let seeds =
      (try? FileManager.default.contentsOfDirectory(
        atPath: Repository.root + "/Tests/Fuzz/" + target.name)) ?? []
    #expect(
      seeds.contains { !$0.hasPrefix(".") && $0 != "README.md" },
      "no seeds in Tests/Fuzz/\(target.name)")
    // The corpus has files of it that must decode, and one large enough for the memory
    // estimates' measured peaks (MemoryEstimateTests), or else a generated one they measure.
    let files = Self.corpusFiles(of: format)
    #expect(!files.isEmpty, "\(format): no decode-ok corpus file")
    #expect(
      files.contains { ($0.storedSize.map { $0.width * $0.height } ?? 0) >= 250_000 }
        || GeneratedLarge.files.contains { $0.format == format },
      "\(format): no corpus file of 0.25 MP or more for the memory estimates, nor a generated one")
    // The docs name it.
    let architecture = try String(
      contentsOfFile: Repository.root + "/docs/ARCHITECTURE.md", encoding: .utf8)
    #expect(
      architecture.contains(format.displayName),
      "docs/ARCHITECTURE.md never names \(format.displayName)")
    for document in ["README.md", "docs/PROTOCOL.md"] {
      let text = try String(contentsOfFile: Repository.root + "/" + document, encoding: .utf8)
      #expect(text.contains(format.displayName), "\(document) never names \(format.displayName)")
    }
    let fuzzing = try String(contentsOfFile: Repository.root + "/docs/FUZZING.md", encoding: .utf8)
    #expect(fuzzing.contains("`\(target.name)`"), "docs/FUZZING.md has no row for \(target.name)")
  }

  @Test("the decoder fuzz targets are exactly the formats' targets, each listed once")
  func decoderTargets() {
    let names = FuzzTarget.all.map(\.name)
    #expect(Set(names).count == names.count, "a target is listed twice")
    let decoders = Set(names.filter { $0.hasPrefix("decode-") })
    #expect(decoders == Set(SourceFormat.allCases.map(\.fuzzTarget.name)))
  }
}
