import Foundation

/// Files of types thumbd hands to installed thumbnailers (PPM, TGA), built byte by byte
/// with a gradient, so a thumbnail of the wrong file or the wrong orientation shows.
enum DelegatedFixtures {
  private static func le(_ value: Int, _ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
  }

  /// The gradient's pixel at (x, y): red across, green down, blue fixed.
  private static func pixel(_ x: Int, _ y: Int, _ width: Int, _ height: Int) -> [UInt8] {
    [UInt8(x * 255 / width), UInt8(y * 255 / height), 120]
  }

  /// A binary PPM (P6, `image/x-portable-pixmap`) of `width` x `height`.
  static func ppm(width: Int, height: Int) -> [UInt8] {
    var bytes = Array("P6\n\(width) \(height)\n255\n".utf8)
    for y in 0..<height {
      for x in 0..<width { bytes += pixel(x, y, width, height) }
    }
    return bytes
  }

  /// An uncompressed true-colour TGA (`image/x-tga`), rows stored bottom-up, of `width` x
  /// `height`.
  static func tga(width: Int, height: Int) -> [UInt8] {
    var bytes: [UInt8] = [0, 0, 2] + [UInt8](repeating: 0, count: 9)
    bytes += le(width, 2) + le(height, 2) + [24, 0]
    for y in (0..<height).reversed() {
      for x in 0..<width {
        let rgb = pixel(x, y, width, height)
        bytes += [rgb[2], rgb[1], rgb[0]]
      }
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
