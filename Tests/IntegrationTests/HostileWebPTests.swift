import Foundation
import Testing

@testable import TestSupport

/// Lossless WebP shapes that made libwebp 1.2 allocate or re-read without bound (issue:
/// hostile input on the new surface), through the CLI in a process of their own, measured
/// from outside: refused or answered within 1 s of CPU and 64 MiB above the baseline.
@Suite("Hostile WebP", .serialized)
struct HostileWebPTests {
  typealias W = WebPLosslessFixtures

  struct Case: CustomTestStringConvertible, Sendable {
    let name: String
    /// The error kind, or nil for a thumbnail.
    let kind: String?
    let bytes: @Sendable () -> [UInt8]
    var testDescription: String { name }
  }

  static let cases: [Case] = [
    // The builder's files decode: 16 groups, and a header of 15-bit codes.
    Case(name: "64x64 with 16 groups", kind: nil) {
      W.file(width: 64, height: 64, groups: 16) { UInt32($0 % 16) }
    },
    // Finding 7: 65,536 groups in a 295 KB file of 1024x1024 took 374 MB.
    Case(name: "1024x1024 naming 65,536 groups", kind: "too_complex") {
      W.file(width: 1024, height: 1024, groups: 65536) { UInt32($0) }
    },
    Case(name: "272x272 naming 4,624 groups", kind: "too_complex") {
      W.file(width: 272, height: 272, groups: 4624) { UInt32($0) }
    },
    // Finding 7: a header of megabytes was re-read from its first byte on every 64 KiB slice.
    Case(name: "3000x2500 behind a 3.5 MB header of 15-bit codes", kind: nil) {
      W.file(width: 3000, height: 2500, groups: 3856, longCodes: true) { _ in 15 << 8 | 15 }
    },
    Case(name: "3000x2500 behind an 8 MB header of full codes and 15-bit codes", kind: nil) {
      W.file(width: 3000, height: 2500, groups: 3856, longCodes: true, fullGroups: true) { _ in
        15 << 8 | 15
      }
    },
    Case(name: "256x256 behind 2,048 groups of full codes (2.4 MB)", kind: nil) {
      W.file(width: 256, height: 256, groups: 2048, fullGroups: true) { UInt32($0 % 2048) }
    },
  ]

  @Test(
    "lossless WebP: too many groups refused, a long header read once; within 1 s of CPU and 64 MiB",
    arguments: cases)
  func bounded(_ shape: Case) async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let input = directory + "/input.webp"
    let bytes = shape.bytes()
    try Data(bytes).write(to: URL(fileURLWithPath: input))
    // Tests/Fuzz/decode-webp holds the seeds this writes.
    try ChildProcess.keepAsFuzzSeed(bytes, name: shape.name)
    let (run, above) = try await ChildProcess.thumbnailMeasured(
      input, size: "64x64", output: directory + "/out.png")
    if let kind = shape.kind {
      #expect(run.status == 1 && run.standardError.contains(": \(kind): "), "\(run.standardError)")
    } else {
      #expect(run.status == 0, "\(run.standardError)")
    }
    #expect(run.cpuSeconds < 1, "\(run.cpuSeconds) s of CPU")
    #expect(
      above < 64 * 1024, "\(above) KiB above the baseline")
  }
}
