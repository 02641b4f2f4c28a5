import Foundation
import ImagePipeline

/// JPEG XL files made from corpus photos by `cjxl` (libjxl-tools, installed by
/// scripts/bootstrap): the kinds of frame whose decodes hold different memory (VarDCT, lossy
/// modular, VarDCT with an alpha channel), for the estimates' tests.
public enum JXLEncoded {
  /// Writes `source` (a path to any image thumbd decodes) as a JPEG XL made with `options`
  /// (`-d 1` for VarDCT, `-m 1 -d 1` for lossy modular), optionally with an alpha gradient
  /// across it, and returns its path (in the temporary folder; the caller removes it).
  public static func copy(of source: String, options: [String], alpha: Bool = false) throws
    -> String
  {
    let bitmap = try Thumbnailer().decodeFullResolution(.path(source))
    var pixels = bitmap.pixels
    var channels = bitmap.channels
    if alpha && channels == 3 {
      pixels = [UInt8](unsafeUninitializedCapacity: bitmap.width * bitmap.height * 4) {
        buffer, count in
        for y in 0..<bitmap.height {
          for x in 0..<bitmap.width {
            let from = (y * bitmap.width + x) * 3
            let to = (y * bitmap.width + x) * 4
            buffer[to] = bitmap.pixels[from]
            buffer[to + 1] = bitmap.pixels[from + 1]
            buffer[to + 2] = bitmap.pixels[from + 2]
            buffer[to + 3] = UInt8(x * 255 / max(bitmap.width - 1, 1))
          }
        }
        count = bitmap.width * bitmap.height * 4
      }
      channels = 4
    }
    let stem = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-jxl-\(UUID().uuidString.prefix(8))").path
    let png = stem + ".png"
    defer { try? FileManager.default.removeItem(atPath: png) }
    let input = Bitmap(
      pixels: pixels, width: bitmap.width, height: bitmap.height, channels: channels)
    try Data(ImageEncoder.png(input, level: 1)).write(to: URL(fileURLWithPath: png))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/cjxl")
    process.arguments = [png, stem + ".jxl", "--quiet"] + options
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: stem + ".jxl"])
    }
    return stem + ".jxl"
  }
}
