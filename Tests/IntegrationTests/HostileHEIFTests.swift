import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

/// HEIF files shaped as attacks on libheif (issue: hostile input on the new surface), run
/// through the CLI in a process of their own, so that a crash, a hang or a runaway allocation
/// fails the test rather than the test runner. Each must be refused with a clear error within
/// 1 s of CPU and 64 MiB above the process's baseline. The valid shapes beside them show the
/// builder makes files libheif reads, so the refusals are the guard's.
@Suite("Hostile HEIF", .serialized)
struct HostileHEIFTests {
  typealias F = HEIFFixtures
  typealias Item = HEIFFixtures.Item
  typealias Reference = HEIFFixtures.Reference

  static let tile = try! F.av1Still(width: 64, height: 64)
  static let still512 = try! F.av1Still(width: 512, height: 512)

  /// A coded AV1 item of the real 64x64 tile, declared `width` x `height`.
  static func tileItem(_ id: UInt32, declared: (UInt32, UInt32) = (64, 64)) -> Item {
    Item(
      id: id, type: "av01",
      properties: [F.ispe(declared.0, declared.1), tile.av1C, F.pixi(bits: 8)],
      data: tile.data)
  }

  /// An av01 item whose sequence header allows `coded` frames while `ispe` says `declared`.
  static func lyingItem(_ id: UInt32, declared: (UInt32, UInt32), coded: (UInt32, UInt32))
    -> Item
  {
    let header = F.av1SequenceHeader(width: coded.0, height: coded.1)
    return Item(
      id: id, type: "av01",
      properties: [F.ispe(declared.0, declared.1), F.av1C(header), F.pixi(bits: 8)],
      data: header)
  }

  static func grid(
    _ id: UInt32, rows: Int, columns: Int, size: (UInt32, UInt32), ispe: (UInt32, UInt32)
  )
    -> Item
  {
    Item(
      id: id, type: "grid", properties: [F.ispe(ispe.0, ispe.1)],
      data: F.grid(rows: rows, columns: columns, width: size.0, height: size.1))
  }

  /// A grid of `count` real 64x64 tiles in `rows` rows.
  static func tiledGrid(rows: Int, columns: Int, declared: (UInt32, UInt32)? = nil) -> [UInt8] {
    let size = (UInt32(columns * 64), UInt32(rows * 64))
    let tiles = (0..<(rows * columns)).map { tileItem(UInt32($0 + 2)) }
    return F.file(
      brand: "avif", primary: 1,
      items: [grid(1, rows: rows, columns: columns, size: size, ispe: declared ?? size)] + tiles,
      references: [Reference("dimg", from: 1, to: tiles.map(\.id))])
  }

  struct Case: CustomTestStringConvertible, Sendable {
    let name: String
    /// The error kinds accepted; empty for a thumbnail.
    let kinds: [String]
    /// Whether the codec itself sees the bitstream, and may print its own diagnostics (dav1d
    /// logs a broken OBU on stderr) before thumbd's one line.
    var codecSpeaks = false
    let bytes: @Sendable () -> [UInt8]
    var testDescription: String { name }

    init(
      name: String, kinds: [String], codecSpeaks: Bool = false,
      bytes: @escaping @Sendable () -> [UInt8]
    ) {
      self.name = name
      self.kinds = kinds
      self.codecSpeaks = codecSpeaks
      self.bytes = bytes
    }
  }

  static let cases: [Case] = [
    // Valid shapes first: the builder's files decode.
    Case(name: "one real AV1 item", kinds: []) {
      F.file(brand: "avif", primary: 1, items: [Self.tileItem(1)])
    },
    Case(name: "a 2x2 grid of real tiles", kinds: []) { Self.tiledGrid(rows: 2, columns: 2) },
    Case(name: "an alpha plane of the same size", kinds: []) {
      var alpha = Self.tileItem(2)
      alpha.properties.append(F.alphaAux)
      return F.file(
        brand: "avif", primary: 1, items: [Self.tileItem(1), alpha],
        references: [Reference("auxl", from: 2, to: [1])])
    },
    // Finding 9: an extent past the end said "0x0 exceeds the size limits".
    Case(name: "a 2x2 grid cut short inside its mdat", kinds: ["truncated"]) {
      Array(Self.tiledGrid(rows: 2, columns: 2).dropLast(100))
    },
    // Finding 2: a grid far larger than its ispe, one real tile: libheif 1.15 computed its
    // plane in 32 bits and wrote past it.
    Case(name: "a 40000x53688 grid declared 64x64 over one 512x512 tile", kinds: ["too_large"]) {
      let tile = Item(
        id: 2, type: "av01", properties: [F.ispe(512, 512), Self.still512.av1C, F.pixi(bits: 8)],
        data: Self.still512.data)
      return F.file(
        brand: "avif", primary: 1,
        items: [Self.grid(1, rows: 1, columns: 1, size: (40000, 53688), ispe: (64, 64)), tile],
        references: [Reference("dimg", from: 1, to: [2])])
    },
    // Issue 52: an extent past the end of the file got 503 out_of_memory (libheif's failed
    // allocation), which invites retries.
    Case(name: "a coded item whose extent runs 2 GB past the end of the file", kinds: ["truncated"])
    {
      var item = Self.tileItem(1)
      item.declaredLength = 2_000_000_000
      return F.file(brand: "avif", primary: 1, items: [item])
    },
    // Finding 3: cycles.
    Case(name: "grid A -> grid B -> grid A", kinds: ["corrupt", "unsupported_format"]) {
      F.file(
        brand: "avif", primary: 1,
        items: [
          Self.grid(1, rows: 1, columns: 1, size: (64, 64), ispe: (64, 64)),
          Self.grid(2, rows: 1, columns: 1, size: (64, 64), ispe: (64, 64)),
        ],
        references: [Reference("dimg", from: 1, to: [2]), Reference("dimg", from: 2, to: [1])])
    },
    Case(name: "an iden of itself", kinds: ["corrupt", "unsupported_format"]) {
      F.file(
        brand: "avif", primary: 1, items: [Item(id: 1, type: "iden", properties: [F.ispe(64, 64)])],
        references: [Reference("dimg", from: 1, to: [1])])
    },
    Case(name: "a grid whose second tile is the grid", kinds: ["corrupt", "unsupported_format"]) {
      F.file(
        brand: "avif", primary: 1,
        items: [
          Self.grid(1, rows: 1, columns: 2, size: (128, 64), ispe: (128, 64)), Self.tileItem(2),
        ],
        references: [Reference("dimg", from: 1, to: [2, 1])])
    },
    Case(name: "iden -> grid -> iden", kinds: ["corrupt", "unsupported_format"]) {
      F.file(
        brand: "avif", primary: 1,
        items: [
          Item(id: 1, type: "iden", properties: [F.ispe(64, 64)]),
          Self.grid(2, rows: 1, columns: 1, size: (64, 64), ispe: (64, 64)),
        ],
        references: [Reference("dimg", from: 1, to: [2]), Reference("dimg", from: 2, to: [1])])
    },
    Case(name: "alpha planes of each other", kinds: ["corrupt", "unsupported_format"]) {
      var first = Self.tileItem(1)
      var second = Self.tileItem(2)
      first.properties.append(F.alphaAux)
      second.properties.append(F.alphaAux)
      return F.file(
        brand: "avif", primary: 1, items: [first, second],
        references: [Reference("auxl", from: 2, to: [1]), Reference("auxl", from: 1, to: [2])])
    },
    // Finding 4: sizes from ispe alone.
    Case(
      name: "an AVIF declared 64x64 whose sequence header says 20000x20000", kinds: ["too_large"]
    ) {
      F.file(
        brand: "avif", primary: 1,
        items: [Self.lyingItem(1, declared: (64, 64), coded: (20000, 20000))])
    },
    Case(name: "an alpha plane declared 64x64, coded 20000x20000", kinds: ["too_large"]) {
      var alpha = Self.lyingItem(2, declared: (64, 64), coded: (20000, 20000))
      alpha.properties.append(F.alphaAux)
      return F.file(
        brand: "avif", primary: 1, items: [Self.tileItem(1), alpha],
        references: [Reference("auxl", from: 2, to: [1])])
    },
    // A coded frame larger than its ispe is no error (real encoders write them, issue 52):
    // these reach the decoder, bounded by their coded size, and fail there (a header alone).
    Case(
      name: "a thumbnail declared 512x512, coded 8192x8192", kinds: ["corrupt"], codecSpeaks: true
    ) {
      let primary = Item(
        id: 1, type: "av01", properties: [F.ispe(512, 512), Self.still512.av1C, F.pixi(bits: 8)],
        data: Self.still512.data)
      return F.file(
        brand: "avif", primary: 1,
        items: [primary, Self.lyingItem(2, declared: (128, 128), coded: (8192, 8192))],
        references: [Reference("thmb", from: 2, to: [1])])
    },
    Case(name: "a grid tile declared 64x64, coded 8192x8192", kinds: ["corrupt"], codecSpeaks: true)
    {
      F.file(
        brand: "avif", primary: 1,
        items: [
          Self.grid(1, rows: 1, columns: 1, size: (64, 64), ispe: (64, 64)),
          Self.lyingItem(2, declared: (64, 64), coded: (8192, 8192)),
        ],
        references: [Reference("dimg", from: 1, to: [2])])
    },
    Case(name: "an HEVC item declared 64x64 whose SPS says 16000x16000", kinds: ["too_large"]) {
      let sps = F.hevcSPS(width: 16000, height: 16000)
      let nal = F.be32(UInt32(sps.count)) + sps
      return F.file(
        brand: "heic", primary: 1,
        items: [
          Item(
            id: 1, type: "hvc1",
            properties: [F.ispe(64, 64), F.hvcC(sps: F.hevcSPS(width: 64, height: 64))], data: nal)
        ])
    },
    // Finding 6: thousands of tiles.
    Case(name: "24,336 real tiles of 64x64 (a truthful 99.7 MP)", kinds: ["too_complex"]) {
      Self.tiledGrid(rows: 156, columns: 156)
    },
    Case(name: "65,025 real tiles of 64x64 declared 64x64", kinds: ["too_complex"]) {
      Self.tiledGrid(rows: 255, columns: 255, declared: (64, 64))
    },
    Case(name: "300 real tiles of 64x64", kinds: ["too_complex"]) {
      Self.tiledGrid(rows: 15, columns: 20)
    },
  ]

  @Test(
    "hostile HEIF graphs and sizes are refused with a clear error within 1 s CPU and 64 MiB above the baseline; valid ones decode",
    arguments: cases)
  func refused(_ shape: Case) async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let input = directory + "/input.avif"
    let bytes = shape.bytes()
    try Data(bytes).write(to: URL(fileURLWithPath: input))
    // Tests/Fuzz/decode-heif holds the seeds this writes.
    try ChildProcess.keepAsFuzzSeed(bytes, name: shape.name)
    let (run, above) = try await ChildProcess.thumbnailMeasured(
      input, size: "64x64", output: directory + "/out.png")
    if shape.kinds.isEmpty {
      #expect(run.status == 0, "\(run.standardError)")
    } else {
      #expect(run.status == 1, "exit \(run.status): \(run.standardError)")
      let line = run.standardError.split(separator: "\n").first { $0.hasPrefix(input) } ?? ""
      let kind = line.split(separator: ":").dropFirst().first.map {
        $0.trimmingCharacters(in: .whitespaces)
      }
      #expect(shape.kinds.contains(kind ?? ""), "\(run.standardError)")
      // One line (GNU time adds its own about the exit status).
      let lines = run.standardError.split(separator: "\n").filter {
        !$0.hasPrefix("Command exited") && (!shape.codecSpeaks || $0.hasPrefix(input))
      }
      #expect(lines.count == 1, "\(run.standardError)")
    }
    #expect(run.cpuSeconds < 1, "\(run.cpuSeconds) s of CPU")
    #expect(
      above < 64 * 1024, "\(above) KiB above the baseline")
  }

  /// A picture whose 512x384 coded frame is declared 256x192 (an encoder that wrote a display
  /// size in ispe, or a sequence header's maximum): its quadrants, red-yellow over black-green.
  static func largerFrame(declared: (UInt32, UInt32)) throws -> [UInt8] {
    var pixels = [UInt8](repeating: 0, count: 512 * 384 * 3)
    for y in 0..<384 {
      for x in 0..<512 {
        let at = (y * 512 + x) * 3
        pixels[at] = x < 256 ? 255 : 0
        pixels[at + 1] = y < 192 ? 255 : 0
      }
    }
    let coded = try F.coded(
      in: ImageEncoder.avif(Bitmap(pixels: pixels, width: 512, height: 384, channels: 3)))
    return F.file(
      brand: "avif", primary: 1,
      items: [
        Item(
          id: 1, type: "av01",
          properties: [F.ispe(declared.0, declared.1), coded.av1C, F.pixi(bits: 8)],
          data: coded.data)
      ])
  }

  /// Issue 52: real AVIFs that libvips and browsers read were refused as "its coded frame is
  /// 1280x720 but it declares 320x180". The frame is shown whole in the declared shape, and the
  /// decode's estimate counts the coded frame, not the smaller declared size.
  @Test(
    "a coded frame larger than its ispe, of the same shape, is shown whole; its estimate counts it")
  func largerCodedFrame() throws {
    let bytes = try Self.largerFrame(declared: (256, 192))
    let thumbnailer = Thumbnailer()
    let spec = ThumbnailSpec(width: 64, height: 64, format: .png)
    let thumbnail = try thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
    #expect(thumbnail.width == 64 && thumbnail.height == 48)
    let bitmap = try thumbnailer.decodeFullResolution(.bytes(thumbnail.data))
    func pixel(_ x: Int, _ y: Int) -> [Int] {
      let at = (y * bitmap.width + x) * bitmap.channels
      return (0..<3).map { Int(bitmap.pixels[at + $0]) }
    }
    // The whole frame, not its declared top-left corner.
    for (x, y, colour) in [
      (8, 8, [255, 255, 0]), (56, 8, [0, 255, 0]), (8, 40, [255, 0, 0]), (56, 40, [0, 0, 0]),
    ] {
      #expect(
        zip(pixel(x, y), colour).allSatisfy { abs($0 - $1) <= 24 }, "\(x),\(y): \(pixel(x, y))")
    }
    let estimate = try thumbnailer.estimate(.bytes(bytes), spec: ValidSpec(spec)).bytes
    #expect(estimate >= 512 * 384 * 3, "\(estimate) bytes")
  }

  @Test("a coded frame of another shape than its ispe is refused as corrupt, not drawn askew")
  func otherShapeFrame() throws {
    let bytes = try Self.largerFrame(declared: (256, 256))
    #expect {
      _ = try Thumbnailer().thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)))
    } throws: { ($0 as? ThumbnailError)?.kind == "corrupt" }
  }
}
