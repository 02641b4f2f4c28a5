import Foundation
import Testing

@testable import ImagePipeline
@testable import TestSupport

/// Which files go to the frame worker as drawings (issue 53): by content only, never an
/// image thumbd decodes itself, never an HTML page that holds an SVG.
@Suite("Drawing formats")
struct DrawingFormatTests {
  static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

  @Test("a PDF's header within its first 1,024 bytes, as readers look for it, and no later")
  func pdfHeader() {
    let page = DrawingFixtures.pdf(width: 100, height: 100)
    #expect(DrawingFormat.sniff(page) == .pdf)
    #expect(DrawingFormat.sniff([UInt8](repeating: 0x20, count: 1000) + page) == .pdf)
    #expect(DrawingFormat.sniff([UInt8](repeating: 0x20, count: 1100) + page) == nil)
    // An image whose bytes hold the header is the image.
    let png = Pictures.solid((1, 2, 3)) + Self.bytes("%PDF-1.4")
    #expect(SourceFormat.sniff(png) == .png && DrawingFormat.sniff(png) == nil)
  }

  @Test(
    "an SVG is XML whose root is svg, after what may come before it",
    arguments: [
      ("plain", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>", true),
      ("a byte-order mark and space", "\u{FEFF} \n\t<svg>", true),
      ("a declaration", "<?xml version=\"1.0\"?>\n<svg width=\"1\">", true),
      (
        "a comment and a document type with a subset",
        "<?xml version=\"1.0\"?><!-- <html> --><!DOCTYPE svg [<!ENTITY a \"<b>\">]><svg>", true
      ),
      ("a prefixed root", "<s:svg xmlns:s=\"http://www.w3.org/2000/svg\">", true),
      (
        "an HTML page holding an SVG", "<!DOCTYPE html><html><body><svg></svg></body></html>", false
      ),
      ("another root", "<?xml version=\"1.0\"?><svgfont/>", false),
      ("a comment that never ends", "<!-- <svg>", false),
      ("text", "svg <svg>", false),
      ("nothing after the declaration", "<?xml version=\"1.0\"?>", false),
    ])
  func svgRoot(_ name: String, _ text: String, _ isSVG: Bool) {
    #expect((DrawingFormat.sniff(Self.bytes(text)) == .svg) == isSVG, "\(name)")
  }

  @Test("a compressed SVG is told by what its head inflates to, cut short or whole")
  func compressed() throws {
    let svg = DrawingFixtures.svg(width: 10, height: 10)
    let zipped = try gzip(svg)
    #expect(DrawingFormat.sniff(zipped) == .svg)
    #expect(DrawingFormat.sniff(zipped.prefix(zipped.count - 8)) == .svg)
    #expect(DrawingFormat.sniff(try gzip(Self.bytes("<html><svg></svg></html>"))) == nil)
    #expect(DrawingFormat.sniff(Array(zipped.prefix(2)) + [UInt8](repeating: 7, count: 60)) == nil)
  }

  /// `bytes` gzip-compressed, by the system's gzip.
  private func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/gzip")
    process.arguments = ["-9", "-c"]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    input.fileHandleForWriting.write(Data(bytes))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Array(data)
  }

  @Test("a video is a video first; every drawing's media type is listed for the desktop")
  func sources() {
    #expect(FrameSource.sniff(Self.bytes("<svg>")) == .drawing(.svg))
    #expect(
      FrameSource.sniff(Self.bytes("OggS") + [UInt8](repeating: 0, count: 60)) == .video(.ogg))
    for format in DrawingFormat.allCases {
      #expect(FrameSource.desktopMediaTypes.contains(format.mediaType))
    }
  }
}
