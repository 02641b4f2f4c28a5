import Foundation
import Testing

@testable import TestSupport

/// JPEGs whose decode once held the whole image for a small thumbnail, measured from outside
/// (GNU time), in a process of their own. A progressive CMYK 7000x7000 took 375 MiB above the
/// baseline (now the DC-scan reader takes CMYK and YCCK); an arithmetic-coded progressive
/// 10000x10000 took 191 MiB, and 190 MiB with 1,000 repeated scans before it was refused (the
/// DC-scan reader reads Huffman codes only, so past 64 MiB of coefficients such a file is
/// refused before they are allocated).
@Suite("Whole-image JPEGs", .serialized)
struct WholeImageJPEGTests {
  struct Shape: CustomTestStringConvertible, Sendable {
    let name: String
    let kind: String?
    let make: @Sendable (String) throws -> Void
    var testDescription: String { name }
  }

  static let shapes: [Shape] = [
    Shape(name: "progressive CMYK 7000x7000", kind: nil) {
      try LargeJPEG.cmykProgressive($0, size: 7000)
    },
    Shape(name: "arithmetic progressive 10000x10000", kind: "too_complex") {
      try LargeJPEG.arithmeticProgressiveGrey($0, size: 10000)
    },
    Shape(
      name: "arithmetic progressive 10000x10000, a scan repeated 1,000 times", kind: "too_complex"
    ) {
      try LargeJPEG.arithmeticProgressiveGrey($0, size: 10000)
      let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: $0)))
      try Data(HostileInputs.repeatedScan(bytes, times: 1000)).write(to: URL(fileURLWithPath: $0))
    },
  ]

  @Test(
    "each is a thumbnail or refused before allocating, within 64 MiB above the baseline and 5 s of CPU",
    arguments: shapes)
  func bounded(_ shape: Shape) async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let input = directory + "/input.jpg"
    try await offPool { try shape.make(input) }
    let (run, above) = try await ChildProcess.thumbnailMeasured(
      input, size: "256x256", output: directory + "/out.png")
    if let kind = shape.kind {
      #expect(run.status == 1 && run.standardError.contains(": \(kind): "), "\(run.standardError)")
    } else {
      #expect(run.status == 0, "\(run.standardError)")
    }
    #expect(
      above < 64 * 1024, "\(above) KiB above the baseline")
    #expect(run.cpuSeconds < 5, "\(run.cpuSeconds) s of CPU")
  }
}
