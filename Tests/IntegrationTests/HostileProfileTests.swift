import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

/// ICC profiles that make lcms2 work without end while it links (issue: hostile input on the
/// new surface), in each carrier: PNG iCCP, JPEG APP2, WebP ICCP. lcms2 cannot be interrupted
/// while it links, so `decode_timeout` never stopped them: an RGB profile whose D2B0 chains
/// 50,000 matrices cost 51 s of CPU. Each must now give its thumbnail (the profile ignored as
/// unlinkable) within 1 s of CPU, in a process of its own, measured from outside.
@Suite("Hostile colour profiles", .serialized)
struct HostileProfileTests {
  enum Carrier: String, CaseIterable, Sendable { case png, jpeg, webp }

  struct Shape: CustomTestStringConvertible, Sendable {
    let name: String
    let profile: @Sendable () -> [UInt8]
    var testDescription: String { name }
  }

  static let shapes: [Shape] = [
    Shape(name: "50,000 chained matrices (400 KB)") {
      ICCFixtures.rgbProfile(floatTag: ICCFixtures.chainedMatrices(50_000))
    },
    Shape(name: "curves of 20,000 segments") {
      ICCFixtures.rgbProfile(floatTag: ICCFixtures.segmentedCurves(20_000))
    },
  ]

  static func carry(_ profile: [UInt8], in carrier: Carrier) throws -> [UInt8] {
    let size = 48
    let pixels: [UInt8] = (0..<(size * size)).flatMap { (i: Int) -> [UInt8] in
      [UInt8(i % 251), UInt8(i % 127), 90]
    }
    let bitmap = Bitmap(pixels: pixels, width: size, height: size, channels: 3)
    switch carrier {
    case .png: return try ICCFixtures.png(ImageEncoder.png(bitmap), profile: profile)
    case .jpeg: return ICCFixtures.jpeg(try ImageEncoder.jpeg(bitmap), profile: profile)
    case .webp:
      return ICCFixtures.webp(
        try ImageEncoder.webp(bitmap), width: size, height: size, profile: profile)
    }
  }

  @Test(
    "a profile lcms2 would link for minutes is ignored: a thumbnail within 1 s of CPU, in every carrier",
    arguments: shapes, Carrier.allCases)
  func ignored(_ shape: Shape, _ carrier: Carrier) async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let input = directory + "/input." + carrier.rawValue
    try Data(Self.carry(shape.profile(), in: carrier)).write(to: URL(fileURLWithPath: input))
    let run = try await ChildProcess.runThumbd(
      ["thumbnail", input, "--size", "32x32", "-o", directory + "/out.png"], measuringMemory: true)
    #expect(run.status == 0, "\(run.standardError)")
    #expect(run.cpuSeconds < 1, "\(run.cpuSeconds) s of CPU")
  }
}
