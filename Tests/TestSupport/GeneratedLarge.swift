import Foundation
import ImagePipeline

/// Large files made for the formats whose corpus files are all small (BMP's and ICO's are test
/// patterns and icons): the memory estimates' measured cases (MemoryEstimateTests) and the
/// format checklist's file of 0.25 MP or more both take them.
enum GeneratedLarge {
  /// One generated file: what it is, and its bytes.
  struct File: Sendable {
    let name: String
    let format: SourceFormat
    let make: @Sendable () throws -> [UInt8]

    /// Writes it to a temporary file and returns the path (the caller removes it).
    func write() throws -> String {
      let path = FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-large-\(UUID().uuidString.prefix(8))-\(name)").path
      try Data(make()).write(to: URL(fileURLWithPath: path))
      return path
    }
  }

  static let files: [File] = [
    File(name: "3mp-rgb24.bmp", format: .bmp) {
      BMPWriter.bmp(BMPWriter.picture(width: 2000, height: 1500, colours: 200), .rgb24)
    },
    File(name: "3mp-rle8.bmp", format: .bmp) {
      BMPWriter.bmp(BMPWriter.picture(width: 2000, height: 1500, colours: 200), .rle8)
    },
    File(name: "1.5mp-argb32.bmp", format: .bmp) {
      BMPWriter.bmp(
        BMPWriter.picture(width: 1500, height: 1000, colours: 200, alpha: true), .argb32)
    },
    File(name: "1mp-png-entry.ico", format: .ico) {
      try BMPWriter.ico([
        (BMPWriter.picture(width: 16, height: 16, colours: 4), false),
        (BMPWriter.picture(width: 1024, height: 1024, colours: 200, alpha: true), true),
      ])
    },
  ]
}
