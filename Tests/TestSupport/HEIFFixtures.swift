import ImagePipeline

/// HEIF files built item by item, for the shapes an attacker makes: grids whose output size
/// lies, reference cycles, coded frames larger than their `ispe`, thousands of tiles. Coded
/// images are real: an AV1 frame from thumbd's own AVIF encoder, or sequence headers and SPS
/// units written here for frames that must not decode.
enum HEIFFixtures {
  /// One item: its ID, four-character type, property boxes and data.
  struct Item {
    var id: UInt32
    var type: String
    var properties: [[UInt8]]
    var data: [UInt8]
    /// The length its `iloc` extent declares, when it lies (nil: the data's own).
    var declaredLength: UInt32?

    init(id: UInt32, type: String, properties: [[UInt8]] = [], data: [UInt8] = []) {
      self.id = id
      self.type = type
      self.properties = properties
      self.data = data
    }
  }

  /// A reference of `type` (dimg, thmb, auxl) from one item to others, in order.
  struct Reference {
    var type: String
    var from: UInt32
    var to: [UInt32]

    init(_ type: String, from: UInt32, to: [UInt32]) {
      self.type = type
      self.from = from
      self.to = to
    }
  }

  // MARK: - Boxes

  static func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
    be32(UInt32(8 + body.count)) + Array(type.utf8) + body
  }

  static func fullBox(_ type: String, version: UInt8 = 0, flags: UInt32 = 0, _ body: [UInt8])
    -> [UInt8]
  {
    box(
      type,
      [version, UInt8(flags >> 16 & 0xFF), UInt8(flags >> 8 & 0xFF), UInt8(flags & 0xFF)] + body)
  }

  static func be16(_ v: UInt32) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
  static func be32(_ v: UInt32) -> [UInt8] {
    [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
  }

  /// The declared size.
  static func ispe(_ width: UInt32, _ height: UInt32) -> [UInt8] {
    fullBox("ispe", be32(width) + be32(height))
  }

  /// Bits a channel, for `channels` channels.
  static func pixi(bits: UInt8, channels: Int = 3) -> [UInt8] {
    fullBox("pixi", [UInt8(channels)] + [UInt8](repeating: bits, count: channels))
  }

  /// An alpha plane's auxiliary type (AVIF's URN).
  static let alphaAux = fullBox(
    "auxC", Array("urn:mpeg:mpegB:cicp:systems:auxiliary:alpha".utf8) + [0])

  /// A grid's description: rows x columns of tiles making `width` x `height`.
  static func grid(rows: Int, columns: Int, width: UInt32, height: UInt32) -> [UInt8] {
    [0, 1, UInt8(rows - 1), UInt8(columns - 1)] + be32(width) + be32(height)
  }

  // MARK: - AV1

  /// An AV1 sequence header OBU (reduced still-picture header) for frames up to
  /// `width` x `height`: what dav1d sizes its frames by.
  static func av1SequenceHeader(width: UInt32, height: UInt32) -> [UInt8] {
    var bits = BitWriter()
    bits.put(0, 3)  // seq_profile
    bits.put(1, 1)  // still_picture
    bits.put(1, 1)  // reduced_still_picture_header
    bits.put(31, 5)  // seq_level_idx: any size
    bits.put(15, 4)  // frame_width_bits_minus_1
    bits.put(15, 4)
    bits.put(width - 1, 16)
    bits.put(height - 1, 16)
    bits.put(0, 3)  // frame_id, superres, cdef ... flags: zero
    bits.put(0, 8)
    let payload = bits.bytes
    return [0x0A, UInt8(payload.count)] + payload
  }

  /// An av1C box carrying `configOBUs`.
  static func av1C(_ configOBUs: [UInt8] = []) -> [UInt8] {
    box("av1C", [0x81, 0x1F, 0x00, 0x00] + configOBUs)
  }

  /// A real AV1 still: the av01 item data and av1C box of `width` x `height` grey, encoded by
  /// thumbd's own AVIF encoder and read back out of its file.
  static func av1Still(width: Int, height: Int) throws -> (data: [UInt8], av1C: [UInt8]) {
    let pixels = [UInt8](repeating: 128, count: width * height * 3)
    let avif = try ImageEncoder.avif(
      Bitmap(pixels: pixels, width: width, height: height, channels: 3))
    return try coded(in: avif)
  }

  // MARK: - HEVC

  /// An HEVC SPS NAL unit for `width` x `height` 4:2:0 frames.
  static func hevcSPS(width: UInt32, height: UInt32) -> [UInt8] {
    var bits = BitWriter()
    bits.put(0, 4)  // vps id
    bits.put(0, 3)  // max sub layers - 1
    bits.put(1, 1)
    bits.put(0x0160_0000, 32)  // profile space, tier, Main profile, compatibility
    bits.put(0, 32)
    bits.put(0, 24)
    bits.put(120, 8)  // level
    bits.ue(0)  // sps id
    bits.ue(1)  // 4:2:0
    bits.ue(width)
    bits.ue(height)
    bits.put(0, 1)  // no conformance window
    bits.ue(0)
    bits.ue(0)  // bit depths 8
    bits.put(1, 1)
    // Escape what would read as a start code, as an encoder must.
    var rbsp: [UInt8] = []
    var zeros = 0
    for byte in bits.bytes {
      if zeros >= 2 && byte <= 3 {
        rbsp.append(3)
        zeros = 0
      }
      rbsp.append(byte)
      zeros = byte == 0 ? zeros + 1 : 0
    }
    return [0x42, 0x01] + rbsp
  }

  /// An hvcC box whose one array holds `sps`.
  static func hvcC(sps: [UInt8], bitDepth: UInt8 = 8) -> [UInt8] {
    var body: [UInt8] = [1, 0x01, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 120, 0xF0, 0, 0xFC, 0xFD]
    body += [0xF8 | (bitDepth - 8), 0xF8 | (bitDepth - 8), 0, 0, 0x0F, 1]
    body += [0x80 | 33] + be16(1) + be16(UInt32(sps.count)) + sps
    return box("hvcC", body)
  }

  // MARK: - Files

  /// A HEIF file of `items`, `references` and `primary`, brand `brand` ("heic" or "avif").
  /// Item data goes in one mdat, located by construction method 0.
  static func file(
    brand: String, primary: UInt32, items: [Item], references: [Reference] = []
  ) -> [UInt8] {
    let ftyp = box("ftyp", Array(brand.utf8) + be32(0) + Array("mif1".utf8) + Array(brand.utf8))
    func meta(dataStart: UInt32) -> [UInt8] {
      let hdlr = fullBox("hdlr", be32(0) + Array("pict".utf8) + [UInt8](repeating: 0, count: 13))
      let pitm = fullBox("pitm", be16(primary))
      var entries: [UInt8] = []
      for item in items {
        entries += fullBox(
          "infe", version: 2, be16(item.id) + be16(0) + Array(item.type.utf8) + [0])
      }
      let iinf = fullBox("iinf", be16(UInt32(items.count)) + entries)
      var refs: [UInt8] = []
      for reference in references {
        refs += box(
          reference.type,
          be16(reference.from) + be16(UInt32(reference.to.count))
            + reference.to.flatMap { be16($0) })
      }
      let iref = fullBox("iref", refs)
      // Identical properties are stored once (thousands of tiles share theirs); indices
      // take 15 bits (ipma flag 1).
      var unique: [[UInt8]] = []
      var indices: [[UInt8]: Int] = [:]
      var associations: [UInt8] = be32(UInt32(items.count))
      for item in items {
        associations += be16(item.id) + [UInt8(item.properties.count)]
        for property in item.properties {
          let index =
            indices[property]
            ?? {
              unique.append(property)
              indices[property] = unique.count
              return unique.count
            }()
          associations += be16(UInt32(index))
        }
      }
      let iprp = box(
        "iprp", box("ipco", unique.flatMap { $0 }) + fullBox("ipma", flags: 1, associations))
      var locations: [UInt8] = [0x44, 0x00] + be16(UInt32(items.count))
      var offset = dataStart
      for item in items {
        locations +=
          be16(item.id) + be16(0) + be16(0) + be16(1) + be32(offset)
          + be32(item.declaredLength ?? UInt32(item.data.count))
        offset += UInt32(item.data.count)
      }
      let iloc = fullBox("iloc", version: 1, locations)
      return fullBox("meta", hdlr + pitm + iloc + iinf + iref + iprp)
    }
    let size = ftyp.count + meta(dataStart: 0).count + 8
    let mdat = box("mdat", items.flatMap { $0.data })
    return ftyp + meta(dataStart: UInt32(size)) + mdat
  }

  /// The first coded item's data and av1C box in a file thumbd's encoder wrote.
  static func coded(in file: [UInt8]) throws -> (data: [UInt8], av1C: [UInt8]) {
    guard let metaRange = children(file, 0..<file.count).first(where: { $0.type == "meta" })?.body
    else { throw ThumbnailError.corrupt("no meta") }
    let meta = children(file, (metaRange.lowerBound + 4)..<metaRange.upperBound)
    var av1C: [UInt8]?
    if let iprp = meta.first(where: { $0.type == "iprp" }),
      let ipco = children(file, iprp.body).first(where: { $0.type == "ipco" }),
      let property = children(file, ipco.body).first(where: { $0.type == "av1C" })
    {
      av1C = Array(file[(property.body.lowerBound - 8)..<property.body.upperBound])
    }
    guard let av1C, let iloc = meta.first(where: { $0.type == "iloc" }) else {
      throw ThumbnailError.corrupt("no av1C or iloc")
    }
    // libheif writes 4-byte offsets and lengths; the base offset is 0 or 4 bytes.
    var at = iloc.body.lowerBound
    let version = file[at]
    at += 4
    let sizes = file[at]
    let baseSize = Int(file[at + 1] >> 4)
    at += 2
    guard sizes == 0x44, baseSize == 0 || baseSize == 4 else {
      throw ThumbnailError.corrupt("iloc field sizes \(sizes)")
    }
    at += 2  // item count
    at += 2  // first item's ID
    if version >= 1 { at += 2 }
    at += 2  // data reference index
    let base = baseSize == 4 ? Int(readBE32(file, at)) : 0
    at += baseSize
    at += 2  // extent count: 1
    let offset = base + Int(readBE32(file, at))
    let length = Int(readBE32(file, at + 4))
    return (Array(file[offset..<(offset + length)]), av1C)
  }

  static func readBE32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
    bytes[at..<(at + 4)].reduce(0) { $0 << 8 | UInt32($1) }
  }

  /// The boxes in `range`: type and body.
  static func children(_ bytes: [UInt8], _ range: Range<Int>) -> [(type: String, body: Range<Int>)]
  {
    var out: [(String, Range<Int>)] = []
    var at = range.lowerBound
    while at + 8 <= range.upperBound {
      let size = Int(readBE32(bytes, at))
      guard size >= 8, at + size <= range.upperBound else { break }
      out.append(
        (String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self), (at + 8)..<(at + size)))
      at += size
    }
    return out
  }

  /// Bits most significant first, with exp-Golomb codes.
  struct BitWriter {
    var bytes: [UInt8] = []
    var count = 0

    mutating func put(_ value: UInt32, _ width: Int) {
      for shift in stride(from: width - 1, through: 0, by: -1) {
        if count % 8 == 0 { bytes.append(0) }
        if value >> UInt32(shift) & 1 == 1 { bytes[bytes.count - 1] |= 0x80 >> UInt8(count % 8) }
        count += 1
      }
    }

    mutating func ue(_ value: UInt32) {
      let coded = UInt64(value) + 1
      let length = 64 - coded.leadingZeroBitCount
      put(0, length - 1)
      for shift in stride(from: length - 1, through: 0, by: -1) {
        put(UInt32(coded >> UInt64(shift) & 1), 1)
      }
    }
  }
}
