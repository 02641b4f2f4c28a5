/// Matroska files built element by element, for the video worker's hostile shapes (issue 54):
/// sizes and counts a real muxer would never write.
enum MatroskaWriter {
  /// One element: its ID's bytes, an 8-byte size (or "unknown" when nil), its content.
  static func element(_ id: [UInt8], _ content: [UInt8], unknownSize: Bool = false) -> [UInt8] {
    let size: [UInt8] =
      unknownSize
      ? [0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
      : [0x01] + (0..<7).reversed().map { UInt8(truncatingIfNeeded: content.count >> (8 * $0)) }
    return id + size + content
  }

  static func unsigned(_ id: [UInt8], _ value: UInt64) -> [UInt8] {
    element(id, (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) })
  }

  static func text(_ id: [UInt8], _ value: String) -> [UInt8] { element(id, Array(value.utf8)) }

  /// The EBML header of a Matroska file.
  static let header = element(
    [0x1A, 0x45, 0xDF, 0xA3],
    unsigned([0x42, 0x86], 1) + unsigned([0x42, 0xF7], 1) + unsigned([0x42, 0xF2], 4)
      + unsigned([0x42, 0xF3], 8) + text([0x42, 0x82], "matroska") + unsigned([0x42, 0x87], 4)
      + unsigned([0x42, 0x85], 2))

  /// A video track `number` of `width` x `height` in `codec` (a Matroska codec ID).
  static func videoTrack(number: UInt64, width: UInt64, height: UInt64, codec: String = "V_VP8")
    -> [UInt8]
  {
    element(
      [0xAE],
      unsigned([0xD7], number) + unsigned([0x73, 0xC5], number) + unsigned([0x83], 1)
        + text([0x86], codec)
        + element([0xE0], unsigned([0xB0], width) + unsigned([0xBA], height)))
  }

  /// A cluster at time 0 of `blocks` key blocks of `payload` on track 1, of unknown size
  /// when `endless` (as a live stream writes it).
  static func cluster(blocks: Int, payload: [UInt8], endless: Bool = false) -> [UInt8] {
    var content = unsigned([0xE7], 0)
    for index in 0..<blocks {
      let time = UInt16(truncatingIfNeeded: index)
      content += element([0xA3], [0x81, UInt8(time >> 8), UInt8(time & 0xFF), 0x80] + payload)
    }
    return element([0x1F, 0x43, 0xB6, 0x75], content, unknownSize: endless)
  }

  /// A file: the header, then a segment of `tracks` and `clusters`.
  static func file(tracks: [[UInt8]], clusters: [[UInt8]] = []) -> [UInt8] {
    let info = element(
      [0x15, 0x49, 0xA9, 0x66], unsigned([0x2A, 0xD7, 0xB1], 1_000_000) + text([0x4D, 0x80], "t"))
    let segment =
      info + element([0x16, 0x54, 0xAE, 0x6B], tracks.flatMap { $0 }) + clusters.flatMap { $0 }
    return header + element([0x18, 0x53, 0x80, 0x67], segment)
  }

  /// The shapes issue 54 names: each must get a typed refusal, quickly.
  static var hostile: [(name: String, bytes: [UInt8])] {
    let garbage = [UInt8](repeating: 0x9D, count: 24)
    return [
      (
        "a huge declared size",
        file(
          tracks: [videoTrack(number: 1, width: 1_000_000, height: 1_000_000)],
          clusters: [cluster(blocks: 4, payload: garbage)])
      ),
      (
        "1,000 streams",
        file(
          tracks: (1...1_000).map { videoTrack(number: UInt64($0), width: 320, height: 240) },
          clusters: [cluster(blocks: 4, payload: garbage)])
      ),
      (
        "only headers", file(tracks: [videoTrack(number: 1, width: 320, height: 240)])
      ),
      (
        "an endless stream of blocks that never decode",
        file(
          tracks: [videoTrack(number: 1, width: 320, height: 240)],
          clusters: [cluster(blocks: 60_000, payload: garbage, endless: true)])
      ),
    ]
  }
}
