import Foundation
import ImagePipeline
import Testing

/// The decoders against the outside robustness test's findings: each input gets its typed
/// answer, and none costs more than 5 s of CPU or 64 MiB above the process baseline.
@Suite("Hostile images", .serialized)
struct HostileDecodeTests {
  struct Input: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    /// The error kind expected, or nil for a thumbnail.
    let kind: String?
    var testDescription: String { name }
  }

  static let inputs: [Input] = {
    let photo = try! Corpus.bytes("photo/coil/normal.jpg")
    var list: [Input] = []
    for name in ["huge_tEXt.png", "huge_zTXt.png", "huge_eXIf.png"] {
      // A chunk claiming 2 GiB in a 44-byte file: libpng used to allocate it all first.
      list.append(Input(name: name, bytes: try! HostileInputs.fixture(name), kind: "truncated"))
    }
    for name in [
      "huge_tEXt_chunk.png", "huge_zTXt_chunk.png", "huge_pCAL_chunk.png", "huge_sCAL_chunk.png",
    ] {
      list.append(
        Input(
          name: name, bytes: try! Corpus.bytes("adversarial/libpng-crashers/" + name),
          kind: "truncated"))
    }
    // 4 GiB of zeros after the last row, in 27 MB: both PNG paths used to inflate it all.
    list.append(
      Input(name: "trailing-zeros-rgb", bytes: HostileInputs.trailingZeros(gray: false), kind: nil))
    list.append(
      Input(name: "trailing-zeros-gray", bytes: HostileInputs.trailingZeros(gray: true), kind: nil))
    // 256 MiB of APP1 segments: every one used to be kept.
    list.append(Input(name: "app1-chain", bytes: HostileInputs.app1Chain(photo), kind: nil))
    // One legal scan repeated 5000 times: no warning, each repetition a full decode.
    for name in ["flat_arith.jpg", "flat_huff.jpg"] {
      list.append(
        Input(
          name: name + " x5000",
          bytes: HostileInputs.repeatedScan(try! HostileInputs.fixture(name), times: 5000),
          kind: "too_complex"))
    }
    // A valid file of 99 scans, one coefficient each.
    list.append(
      Input(
        name: "many_scans.jpg", bytes: try! HostileInputs.fixture("many_scans.jpg"),
        kind: "too_complex"))
    // 65535 px a side: over libjpeg's own 65500, a size limit, not damage.
    list.append(
      Input(
        name: "max_size.jpg", bytes: try! Corpus.bytes("adversarial/jpeg-decoder/max_size.jpg"),
        kind: "too_large"))
    return list
  }()

  @Test("each hostile input gets its typed answer", arguments: inputs)
  func typedAnswer(input: Input) throws {
    let spec = ThumbnailSpec(width: 256, height: 256)
    do {
      let thumbnail = try Thumbnailer().thumbnail(of: input.bytes, spec: spec)
      #expect(input.kind == nil, "\(input.name) gave a thumbnail, expected \(input.kind ?? "")")
      #expect(thumbnail.width >= 1)
    } catch {
      #expect(error.kind == input.kind, "\(input.name): \(error)")
    }
  }

  @Test(
    "each hostile input costs under 5 s of CPU and 64 MiB above the baseline, at default limits",
    arguments: inputs)
  func boundedCost(input: Input) async throws {
    let baseline = try await ChildProcess.runThumbd(["--help"], measuringMemory: true)
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-hostile-\(UUID().uuidString.prefix(8))").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let file = directory + "/input"
    try Data(input.bytes).write(to: URL(fileURLWithPath: file))
    let outcome = try await ChildProcess.runThumbd(
      ["thumbnail", file, "--size", "256x256", "-o", directory + "/out/"], measuringMemory: true)
    #expect(outcome.status == (input.kind == nil ? 0 : 1), "\(outcome.standardError)")
    if let kind = input.kind { #expect(outcome.standardError.contains(": \(kind): ")) }
    #expect(outcome.cpuSeconds < 5, "\(input.name) took \(outcome.cpuSeconds) s of CPU")
    #expect(
      outcome.maxRSSKiB - baseline.maxRSSKiB < 64 * 1024,
      "\(input.name) peaked \(outcome.maxRSSKiB - baseline.maxRSSKiB) KiB above the baseline")
  }

  @Test("a decode past its deadline stops with decode_timeout")
  func deadline() throws {
    let large = try Corpus.bytes("png-valid/large/large.png")
    var thumbnailer = Thumbnailer()
    thumbnailer.limits.decodeTimeout = 0.001
    do throws(ThumbnailError) {
      _ = try thumbnailer.thumbnail(of: large, spec: ThumbnailSpec(width: 64, height: 64))
      Issue.record("a 6000x3300 PNG decoded within 1 ms")
    } catch {
      #expect(error.kind == "decode_timeout")
    }
    thumbnailer.limits.decodeTimeout = 0
    #expect(
      try thumbnailer.thumbnail(of: large, spec: ThumbnailSpec(width: 64, height: 64)).width == 64)
  }

  @Test("real progressive files pass the scan limits; raising them lets a repeated scan through")
  func scanLimits() throws {
    let flat = try HostileInputs.fixture("flat_huff.jpg")
    let spec = ThumbnailSpec(width: 64, height: 64)
    #expect(try Thumbnailer().thumbnail(of: flat, spec: spec).width == 64)
    let repeated = HostileInputs.repeatedScan(flat, times: 30)  // 34 scans, 21 passes
    #expect(throws: ThumbnailError.self) { try Thumbnailer().thumbnail(of: repeated, spec: spec) }
    var generous = Thumbnailer()
    generous.limits.maxScans = 100
    generous.limits.maxScanPasses = 100
    #expect(try generous.thumbnail(of: repeated, spec: spec).width == 64)
    #expect(
      try Thumbnailer().thumbnail(of: Corpus.bytes("photo/coil/normal.jpg"), spec: spec).width > 0)
  }
}
