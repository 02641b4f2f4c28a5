import Testing
import ThumbProtocol

/// Session input that breaks the protocol, in two kinds (docs/PROTOCOL.md, rule 8), each case
/// naming what its answer must blame:
/// - `framing`: bytes that are no message (not a JSON object, no string `op`, a bad `bytes`,
///   a line too long, invalid UTF-8). The server answers `bad_frame` and closes.
/// - `refused`: messages with a field missing, mistyped or out of range, or an unknown op. The
///   server answers `bad_message` for the slot the message names (or with no slot) and the
///   session goes on.
/// ThumbProtocol's unit tests run all of them through the frame reader and the message decoder;
/// the daemon's integration tests send them over a real session.
enum MalformedFrames {
  /// Bytes that break the framing, and a word the `bad_frame` message must contain.
  struct Framing: CustomTestStringConvertible, Sendable {
    let bytes: [UInt8]
    let blames: String
    var testDescription: String {
      String(decoding: bytes.prefix(48), as: UTF8.self).debugDescription
    }
  }

  /// A message the server must refuse where it points: the slot, item, token and round its
  /// `error` names (nil: absent), and the field (or reason) its message must name.
  struct Refused: CustomTestStringConvertible, Sendable {
    let line: String
    let op: String
    var slot: Int? = nil
    var item: String? = nil
    var token: Int? = nil
    var round: Int? = nil
    let blames: String
    var testDescription: String { String(line.prefix(80)).debugDescription }
    var bytes: [UInt8] { Array(line.utf8) }
    /// What ThumbProtocol must read of it.
    var expected: RefusedMessage {
      RefusedMessage(op: op, slot: slot, item: item, token: token, round: round)
    }
  }

  static let framing: [Framing] =
    [
      ("not json\n", "JSON"), ("[1,2]\n", "object"), ("\"load\"\n", "object"), ("42\n", "object"),
      ("{}\n", "op"), ("{\"op\":7}\n", "op"), ("{\"op\":null}\n", "op"),
      ("{\"op\":\"load\"\n", "JSON"), ("{\"op\":\"load\",}\n", "JSON"),
      ("\u{FEFF}{\"op\":\"release\",\"round\":1}\n", "byte order mark"),
      ("{\"op\":\"load\",\"bytes\":-1}\n", "bytes"),
      ("{\"op\":\"load\",\"bytes\":\"3\"}\n", "bytes"),
      ("{\"op\":\"load\",\"bytes\":99999999}\n", "bytes"), ("\u{1}\u{2}\u{3}\n", "JSON"),
      ("\n", "JSON"), ("   \n", "JSON"),
      ("{\"op\":\"release\",\"round\":1}{\"op\":\"x\"}\n", "JSON"),
    ].map { Framing(bytes: Array($0.0.utf8), blames: $0.1) } + [
      Framing(bytes: Array(repeating: UInt8(ascii: "a"), count: 20_000), blames: "16384"),
      Framing(bytes: [0x7B, 0xFF, 0xFE, 0x7D, 0x0A], blames: "UTF-8"),
    ]

  /// The fields of a valid load on slot 1: each case breaks one.
  static let goodLoad: [String: String] = [
    "slot": "1", "item": "\"a\"", "token": "1", "url": "\"http://x/a.jpg\"", "w": "8", "h": "8",
  ]

  static func loadLine(_ fields: [String: String]) -> String {
    "{\"op\":\"load\","
      + fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",")
      + "}\n"
  }

  static let refused: [Refused] = {
    var cases: [Refused] = [
      Refused(line: "{\"op\":\"LOAD\"}\n", op: "LOAD", blames: "unknown op"),
      Refused(line: "{\"op\":\"explode\",\"slot\":1}\n", op: "explode", blames: "unknown op"),
      Refused(line: "{\"op\":\"release\"}\n", op: "release", blames: "round"),
      Refused(line: "{\"op\":\"release\",\"round\":\"1\"}\n", op: "release", blames: "round"),
      Refused(line: "{\"op\":\"release\",\"round\":-1}\n", op: "release", blames: "round"),
      Refused(line: "{\"op\":\"release\",\"round\":1.5}\n", op: "release", blames: "round"),
      Refused(line: "{\"op\":\"release\",\"round\":true}\n", op: "release", blames: "round"),
      Refused(line: "{\"op\":\"cancel\",\"slot\":1}\n", op: "cancel", slot: 1, blames: "token"),
      Refused(line: "{\"op\":\"cancel\",\"token\":1}\n", op: "cancel", token: 1, blames: "slot"),
      Refused(
        line: "{\"op\":\"cancel\",\"slot\":65536,\"token\":1}\n", op: "cancel", token: 1,
        blames: "slot"),
      Refused(
        line: "{\"op\":\"cancel\",\"slot\":-1,\"token\":1}\n", op: "cancel", token: 1,
        blames: "slot"),
      Refused(
        line: "{\"op\":\"priority\",\"slot\":1,\"token\":1}\n", op: "priority", slot: 1, token: 1,
        blames: "priority"),
      Refused(
        line: "{\"op\":\"priority\",\"slot\":1,\"token\":1,\"priority\":\"urgent\"}\n",
        op: "priority", slot: 1, token: 1, blames: "priority"),
      Refused(
        line: "{\"op\":\"priority\",\"slot\":1,\"token\":1,\"priority\":3}\n", op: "priority",
        slot: 1, token: 1, blames: "priority"),
      Refused(
        line: "{\"op\":\"prefetch\",\"round\":1,\"w\":8,\"h\":8}\n", op: "prefetch", round: 1,
        blames: "items"),
      Refused(
        line: "{\"op\":\"prefetch\",\"round\":1,\"items\":{},\"w\":8,\"h\":8}\n", op: "prefetch",
        round: 1, blames: "items"),
      Refused(
        line: "{\"op\":\"prefetch\",\"round\":1,\"items\":[1],\"w\":8,\"h\":8}\n", op: "prefetch",
        round: 1, blames: "item"),
      Refused(
        line: "{\"op\":\"prefetch\",\"round\":1,\"items\":[{\"item\":\"a\"}],\"w\":8,\"h\":8}\n",
        op: "prefetch", round: 1, blames: "url"),
      Refused(
        line:
          "{\"op\":\"prefetch\",\"round\":1,\"items\":[{\"url\":\"http://x/\"}],\"w\":8,\"h\":8}\n",
        op: "prefetch", round: 1, blames: "item"),
      Refused(
        line:
          "{\"op\":\"prefetch\",\"round\":1,\"items\":[{\"item\":\"a\",\"url\":\"http://x/\"}],\"h\":8}\n",
        op: "prefetch", round: 1, blames: "w"),
      Refused(
        line:
          "{\"op\":\"prefetch\",\"round\":1,\"items\":[{\"item\":\"a\",\"url\":\"http://x/\",\"rev\":\"\"}],\"w\":8,\"h\":8}\n",
        op: "prefetch", round: 1, blames: "rev"),
      Refused(
        line: "{\"op\":\"prefetch\",\"items\":[],\"w\":8,\"h\":8}\n", op: "prefetch",
        blames: "round"
      ),
    ]
    // Each required load field missing: the error names what of the slot still reads.
    for field in goodLoad.keys.sorted() {
      var fields = goodLoad
      fields[field] = nil
      cases.append(
        Refused(
          line: loadLine(fields), op: "load", slot: field == "slot" ? nil : 1,
          item: field == "item" ? nil : "a", token: field == "token" ? nil : 1, blames: field))
    }
    // Each field with a wrong type or value (the issue's own: rev "", scale "2", w 64.0).
    let wrong: [(String, String)] = [
      ("slot", "\"1\""), ("slot", "1.5"), ("slot", "true"), ("item", "1"), ("item", "\"\""),
      ("item", "\"" + String(repeating: "i", count: 2000) + "\""), ("token", "\"t\""),
      ("token", "-3"), ("url", "[]"), ("url", "\"\""), ("w", "\"8\""), ("w", "64.0"),
      ("h", "8.5"), ("scale", "\"2\""), ("fit", "3"), ("format", "false"),
      ("quality", "\"high\""), ("colour", "1"), ("priority", "\"soon\""), ("rev", "\"\""),
      ("rev", "\"" + String(repeating: "r", count: 300) + "\""), ("preview", "\"yes\""),
    ]
    for (field, value) in wrong {
      var fields = goodLoad
      fields[field] = value
      cases.append(
        Refused(
          line: loadLine(fields), op: "load", slot: field == "slot" ? nil : 1,
          item: field == "item" ? nil : "a", token: field == "token" ? nil : 1, blames: field))
    }
    return cases
  }()

  /// Every input of both kinds, as bytes.
  static let all: [[UInt8]] = framing.map(\.bytes) + refused.map(\.bytes)
}
