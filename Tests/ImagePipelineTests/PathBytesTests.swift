import Testing
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// `PathBytes`: any path's bytes kept in a `String` and given back exactly (issue 52: file
/// names that are not UTF-8 named no file).
@Suite("Path bytes")
struct PathBytesTests {
  @Test("any bytes come back exactly, and UTF-8 is spelled as itself")
  func roundTrip() {
    var random = SeededRandom(seed: 0x5242)
    // Bytes drawn to hit what matters: ASCII, lone continuation and lead bytes, truncated and
    // overlong sequences, surrogates (ED A0..), and the escape range itself (F4 8F BE/BF ..).
    let pieces: [[UInt8]] = [
      Array("a/".utf8), [0xE9], [0x80], [0xC3], [0xC3, 0xA9], [0xC0, 0xAF], [0xED, 0xA0, 0x80],
      [0xF4, 0x8F, 0xBE, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xF4, 0x8F, 0xBE],
      [0xF4, 0x90, 0x80, 0x80],
      [0xF0, 0x9F, 0x98, 0x80], [0xFF], [0xFE, 0xFF], Array("é".utf8),
    ]
    for _ in 0..<20_000 {
      var bytes: [UInt8] = []
      for _ in 0..<Int(random.next() % 6) {
        bytes +=
          random.next() % 3 == 0
          ? [UInt8(truncatingIfNeeded: random.next() % 255 + 1)]
          : pieces[Int(random.next() % UInt64(pieces.count))]
      }
      let text = PathBytes.string(bytes)
      #expect(PathBytes.bytes(text) == bytes, "\(bytes)")
      let viaC = PathBytes.withCString(text) { pointer in
        Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer))).map {
          UInt8(bitPattern: $0)
        }
      }
      #expect(viaC == bytes, "\(bytes)")
      if let utf8 = String(validating: bytes, as: UTF8.self),
        !utf8.unicodeScalars.contains(where: { $0.value >= 0x10FF80 })
      {
        #expect(text == utf8, "valid UTF-8 is left as it is: \(bytes)")
      }
    }
  }

  @Test("different bytes never give the same string")
  func distinct() {
    let latin1: [UInt8] = Array("caf".utf8) + [0xE9]
    let utf8 = Array("café".utf8)
    let escapedLookalike: [UInt8] = Array("caf".utf8) + [0xF4, 0x8F, 0xBF, 0xA9]
    let spelled = [latin1, utf8, escapedLookalike].map(PathBytes.string)
    #expect(Set(spelled).count == 3, "\(spelled.map(PathBytes.display))")
  }

  @Test("a person reads the bytes that are not UTF-8 as \\xNN, and the rest as it is")
  func display() {
    #expect(
      PathBytes.display(PathBytes.string(Array("/a/café-".utf8) + [0xE9, 0xFF]))
        == "/a/café-\\xE9\\xFF")
    #expect(PathBytes.display("/plain/name.jpg") == "/plain/name.jpg")
  }

  /// Found by the source-url fuzz target: split by `Character`, the `/` before a combining mark
  /// joined it, and `..` was not a segment of its own (the file loader's check missed it).
  @Test("segments are cut at every '/' byte, a combining mark after one included")
  func segmentsByBytes() {
    #expect(PathBytes.segments("/a/../\u{355}x//b") == ["a", "..", "\u{355}x", "b"])
    #expect(PathBytes.segments("/a/../\u{355}x").contains(where: PathBytes.isDotSegment))
    #expect(!PathBytes.isDotSegment("..\u{301}") && PathBytes.isDotSegment("."))
  }
}
