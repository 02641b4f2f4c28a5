import Foundation
import ImagePipeline
import Testing

/// The outside robustness test's findings as inputs: small ones from
/// `Tests/ImagePipelineTests/Fixtures/hostile`, big ones built here in memory.
enum HostileInputs {
  static let fixtures = Repository.hostileFixtures

  static func fixture(_ name: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: fixtures + "/" + name)))
  }

  /// A 1x1 PNG whose zlib stream goes on with `gib` GiB of zeros after its only row (in
  /// byte-aligned fixed-Huffman blocks of 258-byte copies: 27 MB for 4 GiB). Gray takes
  /// libpng's row path, RGB the fast IDAT path.
  static func trailingZeros(gray: Bool, gib: Int = 4) -> [UInt8] {
    let row: [UInt8] = gray ? [0, 0] : [0, 200, 100, 0]
    let stream = zlibZeros(after: row, gib: gib)
    var png = pngSignature + chunk("IHDR", be32(1) + be32(1) + [8, gray ? 0 : 2, 0, 0, 0])
    var offset = 0
    while offset < stream.count {
      let end = min(stream.count, offset + (1 << 20))
      png += chunk("IDAT", Array(stream[offset..<end]))
      offset = end
    }
    return png + chunk("IEND", [])
  }

  /// A zlib stream of `prefix` (stored) and then `gib` GiB of zeros, in byte-aligned
  /// fixed-Huffman blocks of 258-byte copies (27 MB for 4 GiB).
  static func zlibZeros(after prefix: [UInt8], gib: Int) -> [UInt8] {
    let row = prefix
    var bits = BitWriter()
    bits.put(0, count: 1)  // not the final block
    bits.put(1, count: 2)  // fixed Huffman codes
    let copies = 6 + 8 * 4000  // 3 + 13 * copies + 7 bits is a whole number of bytes
    for _ in 0..<copies {
      bits.code(0b1100_0101, length: 8)  // length 258
      bits.code(0, length: 5)  // distance 1
    }
    bits.code(0, length: 7)  // end of block
    precondition(bits.pending == 0)
    let block = bits.bytes
    let perBlock = 258 * copies
    let blocks = (gib << 30) / perBlock
    var stream: [UInt8] = [0x78, 0x01, 0x00]  // zlib header; a stored, non-final block:
    precondition(row.count < 65_536)
    let length = UInt16(row.count)
    stream += [
      UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8),
    ]
    stream += row
    stream.reserveCapacity(stream.count + block.count * blocks + 16)
    for _ in 0..<blocks { stream += block }
    stream += [0x01, 0x00, 0x00, 0xFF, 0xFF]  // final, empty stored block
    stream += adler32(row, zeros: perBlock * blocks)
    return stream
  }

  /// A JPEG with `count` extra APP1 segments of 64 KiB each before its own (256 MiB for 4096).
  static func app1Chain(_ jpeg: [UInt8], count: Int = 4096) -> [UInt8] {
    let segment: [UInt8] =
      [0xFF, 0xE1, 0xFF, 0xFF] + Array("XMP\0".utf8)
      + [UInt8](repeating: 0, count: 65_533 - 4)
    var out = Array(jpeg.prefix(2))
    out.reserveCapacity(jpeg.count + segment.count * count)
    for _ in 0..<count { out += segment }
    return out + jpeg.dropFirst(2)
  }

  /// A progressive JPEG with its second scan repeated `times` times: legal, no warning, and
  /// each repetition decodes every block of that component again.
  static func repeatedScan(_ jpeg: [UInt8], times: Int) -> [UInt8] {
    let scans = scanSegments(jpeg)
    precondition(scans.count >= 2, "needs a progressive JPEG")
    let second = scans[1]
    var out = Array(jpeg[..<second.upperBound])
    let scan = Array(jpeg[second])
    out.reserveCapacity(jpeg.count + scan.count * times)
    for _ in 0..<times { out += scan }
    return out + jpeg[second.upperBound...]
  }

  /// The byte ranges of each SOS segment with its entropy-coded data.
  static func scanSegments(_ jpeg: [UInt8]) -> [Range<Int>] {
    var ranges: [Range<Int>] = []
    var i = 2
    while i + 4 <= jpeg.count, jpeg[i] == 0xFF {
      let marker = jpeg[i + 1]
      if marker == 0xD9 { break }
      let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
      var end = i + 2 + length
      if marker == 0xDA {
        while end + 1 < jpeg.count
          && !(jpeg[end] == 0xFF && jpeg[end + 1] != 0 && !(0xD0...0xD7).contains(jpeg[end + 1]))
        {
          end += 1
        }
        ranges.append(i..<end)
      }
      i = end
    }
    return ranges
  }

  // MARK: - PNG and zlib pieces

  static let pngSignature = PNGChunks.signature

  static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] { PNGChunks.chunk(type, data) }

  static func be32(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
  }

  /// Adler-32 of `prefix` followed by `zeros` zero bytes.
  static func adler32(_ prefix: [UInt8], zeros: Int) -> [UInt8] {
    var a: UInt64 = 1
    var b: UInt64 = 0
    for byte in prefix {
      a = (a + UInt64(byte)) % 65_521
      b = (b + a) % 65_521
    }
    b = (b + UInt64(zeros % 65_521) * a) % 65_521
    return be32(UInt32(b << 16 | a))
  }

  /// DEFLATE's bit order: values least significant bit first, Huffman codes most first.
  struct BitWriter {
    var bytes: [UInt8] = []
    private var accumulator: UInt8 = 0
    private(set) var pending = 0

    mutating func put(_ value: UInt32, count: Int) {
      for i in 0..<count { push(UInt8((value >> UInt32(i)) & 1)) }
    }

    mutating func code(_ code: UInt32, length: Int) {
      for i in stride(from: length - 1, through: 0, by: -1) { push(UInt8((code >> UInt32(i)) & 1)) }
    }

    /// Zero bits up to the next byte.
    mutating func padToByte() {
      while pending != 0 { push(0) }
    }

    private mutating func push(_ bit: UInt8) {
      accumulator |= bit << UInt8(pending)
      pending += 1
      if pending == 8 {
        bytes.append(accumulator)
        accumulator = 0
        pending = 0
      }
    }
  }

  /// A gzip stream of `members` x 64 MiB of zeros (concatenated gzip members are one valid
  /// stream; each is 64 KB), made with the system's gzip on a thread of its own.
  static func gzipBomb(members: Int) async throws -> [UInt8] {
    let member: [UInt8] = try await offPool {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/bin/sh")
      process.arguments = ["-c", "head -c 67108864 /dev/zero | gzip -9 -c"]
      let pipe = Pipe()
      process.standardOutput = pipe
      try process.run()
      let bytes = [UInt8](pipe.fileHandleForReading.readDataToEndOfFile())
      process.waitUntilExit()
      return bytes
    }
    precondition(member.count > 0 && member.count < 1 << 20)
    var bomb: [UInt8] = []
    bomb.reserveCapacity(member.count * members)
    for _ in 0..<members { bomb.append(contentsOf: member) }
    return bomb
  }

  /// A hostile input and the answer it must get.
  struct Input: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    /// The error kind expected, or nil for a thumbnail.
    let kind: String?
    var testDescription: String { name }
  }

  /// One of each finding's inputs, with its expected answer.
  static let all: [Input] = {
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
    list += newSurface
    list += roundTwo
    return list
  }()

  /// The second round's formats: BMP and ICO, TIFF, JPEG XL, camera RAW.
  static let roundTwo: [Input] = bmpAndIco + tiff + jxl + raw

  /// Camera RAW shapes (issue 54): a preview offset past the end, directories that loop (IFD0
  /// its own next, a SubIFD that is IFD0), 1,000 SubIFD offsets: a typed refusal.
  static let raw: [Input] = {
    var b = RawFixtures.Builder()
    let make = b.blob(Array("NIKON\0".utf8))
    let ifd0At = b.bytes.count + (b.bytes.count % 2)
    let ifd0 = b.directory(
      [
        (271, 2, [6, make]), (262, 3, [32803]), (330, 4, [ifd0At]), (513, 4, [0x7FFF_0000]),
        (514, 4, [4096]),
      ], next: ifd0At)
    precondition(ifd0 == ifd0At)
    var many = RawFixtures.Builder()
    let manyMake = many.blob(Array("SONY\0".utf8))
    let manyIFD0 = many.directory([
      (271, 2, [5, manyMake]), (262, 3, [34892]), (330, 4, Array(repeating: 8, count: 1000)),
    ])
    return [
      Input(
        name: "raw-preview-past-end-looping", bytes: b.finish(ifd0: ifd0),
        kind: "unsupported_format"),
      Input(
        name: "raw-1000-subifds", bytes: many.finish(ifd0: manyIFD0), kind: "unsupported_format"),
    ]
  }()

  /// JPEG XL shapes (issue 54): a codestream whose size header declares 60,000 x 60,000 in a
  /// few bytes (its bits written from the specification's SizeHeader: no div8, a 30-bit height
  /// and width, default metadata), and a small image whose first frame declares a giant size of
  /// its own (the frame header's fields likewise): each refused from its header.
  static let jxl: [Input] = {
    var bits = BitWriter()
    bits.put(0, count: 1)  // not div8
    bits.put(3, count: 2)  // height: the 30-bit form
    bits.put(59_999, count: 30)
    bits.put(0, count: 3)  // no ratio: a width follows
    bits.put(3, count: 2)
    bits.put(59_999, count: 30)
    bits.put(1, count: 1)  // image metadata: all default
    bits.put(0, count: 7)
    // A 64x64 image whose first frame declares a size of its own, 1,000,000 x 1,000,000: libjxl
    // 0.7 takes any frame size, so it is refused from thumbd's read of the frame header.
    var frame = BitWriter()
    frame.put(1, count: 1)  // a small size header: 64 (8 x 8) high, ratio 1:1
    frame.put(7, count: 5)
    frame.put(1, count: 3)
    frame.put(1, count: 1)  // image metadata: all default
    frame.put(1, count: 1)  // transform data: all default
    frame.padToByte()
    frame.put(0, count: 1)  // the frame header, not all default
    frame.put(0, count: 2)  // a regular frame
    frame.put(1, count: 1)  // modular
    frame.put(0, count: 2)  // flags: none
    frame.put(0, count: 2)  // upsampling 1
    frame.put(1, count: 2)  // group size shift
    frame.put(0, count: 2)  // one pass
    frame.put(1, count: 1)  // a size or origin of its own
    for _ in 0..<2 {  // origin 0, 0
      frame.put(0, count: 2)
      frame.put(0, count: 8)
    }
    for _ in 0..<2 {  // 1,000,000 a side: BitsOffset(30, 18688)
      frame.put(3, count: 2)
      frame.put(1_000_000 - 18688, count: 30)
    }
    frame.put(0, count: 2)  // blending: replace
    frame.put(1, count: 1)  // the last frame
    frame.put(0, count: 2)  // no name
    frame.put(1, count: 1)  // loop filter: all default
    frame.put(0, count: 2)  // no extensions
    frame.padToByte()
    return [
      Input(
        name: "jxl-huge-declared", bytes: [0xFF, 0x0A] + bits.bytes + [0, 0, 0, 0],
        kind: "too_large"),
      Input(
        name: "jxl-huge-frame",
        bytes: [0xFF, 0x0A] + frame.bytes + [UInt8](repeating: 0, count: 64),
        kind: "too_large"),
    ]
  }()

  /// TIFF shapes (issue 54): sizes that lie, strips past the end, a Deflate bomb, a JPEG
  /// strip that is not what the directory says, directories in a loop.
  static let tiff: [Input] = {
    typealias I = TIFFWriter.Image
    let small = BMPWriter.picture(width: 64, height: 64, colours: 50)
    func patched(_ bytes: [UInt8], tag: Int, value: Int) -> [UInt8] {
      // The first directory's entry for `tag` (little-endian, 12-byte entries at offset 8+).
      var bytes = bytes
      let at = Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
      let count = Int(bytes[at]) | Int(bytes[at + 1]) << 8
      for i in 0..<count {
        let entry = at + 2 + 12 * i
        if Int(bytes[entry]) | Int(bytes[entry + 1]) << 8 == tag {
          bytes.replaceSubrange((entry + 8)..<(entry + 12), with: BMPWriter.le(value, 4))
        }
      }
      return bytes
    }
    var list: [Input] = []
    // 60,000 x 60,000 declared over a 64x64 strip: refused from the directory.
    list.append(
      Input(
        name: "tiff-huge-declared",
        bytes: patched(
          patched(TIFFWriter.file([I(picture: small, rowsPerStrip: 64)]), tag: 256, value: 60000),
          tag: 257, value: 60000), kind: "too_large"))
    // 9,000 x 9,000 (81 MP) whose one strip lies past the end of the file.
    list.append(
      Input(
        name: "tiff-strip-past-end",
        bytes: patched(
          patched(
            patched(TIFFWriter.file([I(picture: small, rowsPerStrip: 64)]), tag: 256, value: 9000),
            tag: 257, value: 9000), tag: 273, value: 0x7FFF_0000), kind: "truncated"))
    // A 64x64 grey strip whose Deflate stream goes on for 4 GiB: inflating stops at the strip.
    let grey = Bitmap(
      pixels: [UInt8](repeating: 90, count: 64 * 64), width: 64, height: 64, channels: 1)
    list.append(
      Input(
        name: "tiff-deflate-bomb",
        bytes: TIFFWriter.file([
          I(
            picture: grey, photometric: 1, rowsPerStrip: 64, compression: 8,
            encodedChunks: [zlibZeros(after: [UInt8](repeating: 90, count: 64 * 64), gib: 4)])
        ]), kind: nil))
    // A JPEG strip of 512x512 in a directory of 64x64.
    let jpeg = try! ImageEncoder.jpeg(BMPWriter.picture(width: 512, height: 512, colours: 50))
    list.append(
      Input(
        name: "tiff-jpeg-strip-lies",
        bytes: TIFFWriter.file([
          I(picture: small, rowsPerStrip: 64, compression: 7, encodedChunks: [jpeg])
        ]), kind: "corrupt"))
    // Two reduced directories that point at each other, after the page.
    var looped = TIFFWriter.file([
      I(picture: small),
      I(picture: BMPWriter.picture(width: 32, height: 32, colours: 9), reduced: true),
      I(picture: BMPWriter.picture(width: 16, height: 16, colours: 9), reduced: true),
    ])
    // The last directory's next-offset (the file's last 4 bytes) back to the second's.
    let second = {
      var at = Int(looped[4]) | Int(looped[5]) << 8 | Int(looped[6]) << 16 | Int(looped[7]) << 24
      let count = Int(looped[at]) | Int(looped[at + 1]) << 8
      at += 2 + 12 * count
      return Int(looped[at]) | Int(looped[at + 1]) << 8 | Int(looped[at + 2]) << 16
        | Int(looped[at + 3]) << 24
    }()
    looped.replaceSubrange((looped.count - 4)..<looped.count, with: BMPWriter.le(second, 4))
    list.append(Input(name: "tiff-directory-loop", bytes: looped, kind: nil))
    return list
  }()

  /// BMP and ICO shapes (issue 54): RLE that writes past its rows, sizes that overflow or lie
  /// about the bytes there are, icon entries that lie about their size and offset.
  static let bmpAndIco: [Input] = {
    let le = BMPWriter.le
    func info(_ width: Int, _ height: Int, bits: Int, compression: Int = 0) -> [UInt8] {
      le(40, 4) + le(width, 4) + le(height, 4) + le(1, 2) + le(bits, 2) + le(compression, 4)
        + le(0, 4) + le(2835, 4) + le(2835, 4) + le(0, 4) + le(0, 4)
    }
    func bmp(_ header: [UInt8], _ palette: [UInt8] = [], _ rows: [UInt8]) -> [UInt8] {
      let offset = 14 + header.count + palette.count
      return Array("BM".utf8) + le(offset + rows.count, 4) + le(0, 4) + le(offset, 4) + header
        + palette + rows
    }
    let palette: [UInt8] = (0..<256).flatMap { i -> [UInt8] in [UInt8(i), UInt8(255 - i), 80, 0] }
    var list: [Input] = []
    // 4x4 pixels, then a million runs of 255 that all land past the row's end: each clipped,
    // and commands past what the pixels can take are refused.
    list.append(
      Input(
        name: "bmp-rle8-runs-past-rows",
        bytes: bmp(
          info(4, 4, bits: 8, compression: 1), palette,
          Array([[UInt8]](repeating: [255, 7], count: 1 << 20).joined())),
        kind: "corrupt"))
    // Deltas that jump past the last row: the rows end there, the rest is not read.
    list.append(
      Input(
        name: "bmp-rle4-delta-past-end",
        bytes: bmp(
          info(64, 64, bits: 4, compression: 2), Array(palette[0..<64]),
          [8, 0x12] + Array([[UInt8]](repeating: [0, 2, 255, 255], count: 4096).joined())),
        kind: nil))
    // 2^31-1 pixels wide, one row: a row size that overflows 32 bits.
    list.append(
      Input(
        name: "bmp-width-overflow", bytes: bmp(info(0x7FFF_FFFF, 1, bits: 32), [], [0, 0, 0, 0]),
        kind: "too_large"))
    // 9,000 x 9,000 (81 MP, under the pixel limit) in 60 bytes: refused before a row is read.
    list.append(
      Input(
        name: "bmp-rows-not-there", bytes: bmp(info(9000, 9000, bits: 24), [], [1, 2, 3, 4]),
        kind: "truncated"))
    // An icon's entry whose offset and size point past the end of the file.
    let entry: [UInt8] = [16, 16, 0, 0] + le(1, 2) + le(32, 2)
    list.append(
      Input(
        name: "ico-entry-past-end",
        bytes: le(0, 2) + le(1, 2) + le(1, 2) + entry + le(0x7FFF_FFFF, 4) + le(0x7FFF_0000, 4)
          + [UInt8](repeating: 0, count: 64),
        kind: "corrupt"))
    // 65,535 directory entries, every one the same 1x1 DIB: only the first 256 are looked at.
    let dib = info(1, 2, bits: 24) + [9, 9, 9, 0] + [0, 0, 0, 0]
    let count = 65535
    let at = 6 + 16 * count
    list.append(
      Input(
        name: "ico-65535-entries",
        bytes: le(0, 2) + le(1, 2) + le(count, 2)
          + Array([[UInt8]](repeating: entry + le(dib.count, 4) + le(at, 4), count: count).joined())
          + dib,
        kind: nil))
    // A PNG entry whose header declares 60,000 x 60,000.
    var png = PNGChunks.chunk("IHDR", [0, 0, 0xEA, 0x60, 0, 0, 0xEA, 0x60, 8, 6, 0, 0, 0])
    png = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + png + PNGChunks.chunk("IEND", [])
    list.append(
      Input(
        name: "ico-png-entry-huge",
        bytes: le(0, 2) + le(1, 2) + le(1, 2) + entry + le(png.count, 4) + le(22, 4) + png,
        kind: "too_large"))
    return list
  }()

  /// The formats and colour management the second round added (HostileHEIFTests,
  /// HostileWebPTests and HostileProfileTests have every shape; these are one of each kind).
  static let newSurface: [Input] = {
    typealias F = HEIFFixtures
    let tile = try! F.av1Still(width: 64, height: 64)
    func tileItem(_ id: UInt32) -> F.Item {
      F.Item(
        id: id, type: "av01", properties: [F.ispe(64, 64), tile.av1C, F.pixi(bits: 8)],
        data: tile.data)
    }
    var list: [Input] = []
    // An iden of itself: libheif recursed without end.
    list.append(
      Input(
        name: "heif-iden-of-itself",
        bytes: F.file(
          brand: "avif", primary: 1,
          items: [F.Item(id: 1, type: "iden", properties: [F.ispe(64, 64)])],
          references: [F.Reference("dimg", from: 1, to: [1])]),
        kind: "corrupt"))
    // Declared 64x64, coded 20000x20000: 2.1 GB a decode.
    let header = F.av1SequenceHeader(width: 20000, height: 20000)
    list.append(
      Input(
        name: "avif-lying-ispe",
        bytes: F.file(
          brand: "avif", primary: 1,
          items: [
            F.Item(
              id: 1, type: "av01", properties: [F.ispe(64, 64), F.av1C(header), F.pixi(bits: 8)],
              data: header)
          ]),
        kind: "too_large"))
    // 24,336 real tiles: 8 to 12 s of CPU in libheif.
    let tiles = (0..<(156 * 156)).map { tileItem(UInt32($0 + 2)) }
    list.append(
      Input(
        name: "heif-24336-tiles",
        bytes: F.file(
          brand: "avif", primary: 1,
          items: [
            F.Item(
              id: 1, type: "grid", properties: [F.ispe(9984, 9984)],
              data: F.grid(rows: 156, columns: 156, width: 9984, height: 9984))
          ] + tiles,
          references: [F.Reference("dimg", from: 1, to: tiles.map(\.id))]),
        kind: "too_complex"))
    // 50,000 chained matrices in a PNG's profile: 51 s in lcms2; now ignored.
    let pixels = [UInt8](repeating: 120, count: 32 * 32 * 3)
    let png = try! ImageEncoder.png(Bitmap(pixels: pixels, width: 32, height: 32, channels: 3))
    list.append(
      Input(
        name: "png-icc-50000-matrices",
        bytes: try! ICCFixtures.png(
          png, profile: ICCFixtures.rgbProfile(floatTag: ICCFixtures.chainedMatrices(50_000))),
        kind: nil))
    // 65,536 prefix-code groups: 371 MB of tables in libwebp.
    list.append(
      Input(
        name: "webp-65536-groups",
        bytes: WebPLosslessFixtures.file(width: 1024, height: 1024, groups: 65536) { UInt32($0) },
        kind: "too_complex"))
    return list
  }()
}
