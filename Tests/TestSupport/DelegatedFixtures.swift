import Foundation

/// Files of the types thumbd hands to installed thumbnailers (BMP, TIFF), built byte by byte
/// with a gradient, so a thumbnail of the wrong file or the wrong orientation shows.
enum DelegatedFixtures {
  private static func le(_ value: Int, _ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
  }

  /// The gradient's pixel at (x, y): red across, green down, blue fixed.
  private static func pixel(_ x: Int, _ y: Int, _ width: Int, _ height: Int) -> [UInt8] {
    [UInt8(x * 255 / width), UInt8(y * 255 / height), 120]
  }

  /// A 24-bit bottom-up BMP (BITMAPINFOHEADER) of `width` x `height`.
  static func bmp(width: Int, height: Int) -> [UInt8] {
    let row = (width * 3 + 3) / 4 * 4
    var bytes: [UInt8] = Array("BM".utf8) + le(54 + row * height, 4) + le(0, 4) + le(54, 4)
    bytes += le(40, 4) + le(width, 4) + le(height, 4) + le(1, 2) + le(24, 2) + le(0, 4)
    bytes += le(row * height, 4) + le(2835, 4) + le(2835, 4) + le(0, 4) + le(0, 4)
    for y in (0..<height).reversed() {
      var line: [UInt8] = []
      for x in 0..<width {
        let rgb = pixel(x, y, width, height)
        line += [rgb[2], rgb[1], rgb[0]]
      }
      bytes += line + [UInt8](repeating: 0, count: row - width * 3)
    }
    return bytes
  }

  /// An uncompressed baseline RGB TIFF (little-endian, one strip) of `width` x `height`.
  static func tiff(width: Int, height: Int) -> [UInt8] {
    let entries: [(tag: Int, type: Int, count: Int, value: Int)] = [
      (256, 3, 1, width), (257, 3, 1, height), (258, 3, 3, 0), (259, 3, 1, 1), (262, 3, 1, 2),
      (273, 4, 1, 0), (277, 3, 1, 3), (278, 3, 1, height), (279, 4, 1, width * height * 3),
    ]
    let bitsOffset = 8 + 2 + entries.count * 12 + 4
    let pixelsOffset = bitsOffset + 6
    var bytes: [UInt8] = Array("II".utf8) + le(42, 2) + le(8, 4) + le(entries.count, 2)
    for entry in entries {
      let value = entry.tag == 258 ? bitsOffset : entry.tag == 273 ? pixelsOffset : entry.value
      bytes += le(entry.tag, 2) + le(entry.type, 2) + le(entry.count, 4) + le(value, 4)
    }
    bytes += le(0, 4) + le(8, 2) + le(8, 2) + le(8, 2)
    for y in 0..<height {
      for x in 0..<width { bytes += pixel(x, y, width, height) }
    }
    return bytes
  }

  /// Processes on this machine whose command line holds `marker` (a sandboxed child is
  /// named by its input's path inside the sandbox, or by an argument it was given).
  static func processes(holding marker: String) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.filter { entry in
      guard Int(entry) != nil,
        let line = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
      else { return false }
      return line.range(of: Data(marker.utf8)) != nil
    }.count ?? 0
  }
}
