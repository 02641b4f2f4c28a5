/// Session frames a server must refuse with `bad_frame`: unparsable headers, unknown ops,
/// fields missing, mistyped or out of range, bodies of impossible sizes. ThumbProtocol's unit
/// tests run all of them through the frame reader and the message decoder; the daemon's
/// integration test sends a sample over a real session.
enum MalformedFrames {
  /// Header lines, each malformed in its own way.
  static let lines: [String] = {
    var frames = [
      "not json\n", "[1,2]\n", "\"load\"\n", "42\n", "{}\n", "{\"op\":7}\n", "{\"op\":\"LOAD\"}\n",
      "{\"op\":\"explode\"}\n", "{\"op\":null}\n", "{\"op\":\"load\"\n", "{\"op\":\"load\",}\n",
      "\u{FEFF}{\"op\":\"release\",\"round\":1}\n",
      "{\"op\":\"release\"}\n", "{\"op\":\"release\",\"round\":\"1\"}\n",
      "{\"op\":\"release\",\"round\":-1}\n", "{\"op\":\"release\",\"round\":1.5}\n",
      "{\"op\":\"release\",\"round\":true}\n",
      "{\"op\":\"cancel\",\"slot\":1}\n", "{\"op\":\"cancel\",\"token\":1}\n",
      "{\"op\":\"cancel\",\"slot\":65536,\"token\":1}\n",
      "{\"op\":\"cancel\",\"slot\":-1,\"token\":1}\n",
      "{\"op\":\"priority\",\"slot\":1,\"token\":1}\n",
      "{\"op\":\"priority\",\"slot\":1,\"token\":1,\"priority\":\"urgent\"}\n",
      "{\"op\":\"priority\",\"slot\":1,\"token\":1,\"priority\":3}\n",
      "{\"op\":\"prefetch\",\"round\":1,\"w\":8,\"h\":8}\n",
      "{\"op\":\"prefetch\",\"round\":1,\"items\":{},\"w\":8,\"h\":8}\n",
      "{\"op\":\"prefetch\",\"round\":1,\"items\":[1],\"w\":8,\"h\":8}\n",
      "{\"op\":\"prefetch\",\"round\":1,\"items\":[{\"item\":\"a\"}],\"w\":8,\"h\":8}\n",
      "{\"op\":\"prefetch\",\"round\":1,\"items\":[{\"url\":\"http://x/\"}],\"w\":8,\"h\":8}\n",
      "{\"op\":\"prefetch\",\"round\":1,\"items\":[{\"item\":\"a\",\"url\":\"http://x/\"}],\"h\":8}\n",
      "{\"op\":\"prefetch\",\"items\":[],\"w\":8,\"h\":8}\n",
      "{\"op\":\"load\",\"bytes\":-1}\n", "{\"op\":\"load\",\"bytes\":\"3\"}\n",
      "{\"op\":\"load\",\"bytes\":99999999}\n",
      "\u{1}\u{2}\u{3}\n", "\n", "   \n", "{\"op\":\"release\",\"round\":1}{\"op\":\"x\"}\n",
    ]
    let good: [String: String] = [
      "slot": "1", "item": "\"a\"", "token": "1", "url": "\"http://x/a.jpg\"", "w": "8", "h": "8",
    ]
    // Each required load field missing, then each with a wrong type or value.
    for field in good.keys.sorted() {
      let fields = good.filter { $0.key != field }.map { "\"\($0.key)\":\($0.value)" }
      frames.append("{\"op\":\"load\"," + fields.joined(separator: ",") + "}\n")
    }
    let wrong: [(String, String)] = [
      ("slot", "\"1\""), ("slot", "1.5"), ("slot", "true"), ("item", "1"), ("item", "\"\""),
      ("item", "\"" + String(repeating: "i", count: 2000) + "\""), ("token", "\"t\""),
      ("token", "-3"), ("url", "[]"), ("url", "\"\""), ("w", "\"8\""), ("h", "8.5"),
      ("scale", "\"2\""), ("fit", "3"), ("format", "false"), ("quality", "\"high\""),
      ("priority", "\"soon\""),
    ]
    for (field, value) in wrong {
      var fields = good
      fields[field] = value
      frames.append(
        "{\"op\":\"load\"," + fields.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",")
          + "}\n")
    }
    return frames
  }()

  /// Every malformed input, as bytes: the lines, a header without a newline in its first
  /// 16 KiB, and a header that is not UTF-8.
  static let all: [[UInt8]] =
    lines.map { Array($0.utf8) } + [
      Array(repeating: UInt8(ascii: "a"), count: 20_000), [0x7B, 0xFF, 0xFE, 0x7D, 0x0A],
    ]

  /// One of each kind, for tests that pay a connection per input.
  static let sample: [[UInt8]] =
    [
      lines[0], lines[6], "{\"op\":\"release\",\"round\":-1}\n",
      "{\"op\":\"load\",\"bytes\":99999999}\n",
    ].map { Array($0.utf8) } + all.suffix(2)
}
