import Testing

@testable import TestSupport
@testable import ThumbProtocol

/// The session frame, error body and config parser: strict RFC 8259.
@Suite("JSON parser")
struct JSONParserTests {
  @Test(
    "valid JSON parses to the expected values",
    arguments: [
      (
        "{\"op\":\"load\",\"slot\":3,\"w\":64.5,\"ok\":true,\"no\":false,\"x\":null}",
        JSONValue.object([
          "op": .string("load"), "slot": .integer(3), "w": .number(64.5), "ok": .bool(true),
          "no": .bool(false), "x": .null,
        ])
      ),
      (
        " [1, -2, 0, 1e3, 2.5E-1, -0.0] ",
        .array([.integer(1), .integer(-2), .integer(0), .number(1000), .number(0.25), .number(-0)])
      ),
      ("\"a\\\"b\\\\c\\/d\\n\\t\\u00e9\\ud83d\\ude00\"", .string("a\"b\\c/d\n\té😀")),
      ("\"héllo\"", .string("héllo")),
      ("{\"a\":1,\"a\":2}", .object(["a": .integer(2)])),
      ("99999999999999999999", .number(1e20)),
      (
        "{\"items\":[{\"item\":\"1\",\"url\":\"http://x/1\"}],\"round\":7}",
        .object([
          "items": .array([.object(["item": .string("1"), "url": .string("http://x/1")])]),
          "round": .integer(7),
        ])
      ),
    ])
  func valid(text: String, expected: JSONValue) {
    #expect(JSONValue.parse(Array(text.utf8)) == expected)
  }

  @Test(
    "invalid JSON is refused",
    arguments: [
      "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{a:1}", "{\"a\" 1}", "[1 2]", "01", "-", "1.",
      ".5", "1e", "+1", "tru", "nul", "True", "\"abc", "\"a\nb\"", "\"\\x\"", "\"\\u12\"",
      "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "{} {}", "[1]x", "\u{FEFF}{}",
      "NaN", "Infinity", "'a'", "{\"a\":1}}", "[[[[",
    ])
  func invalid(text: String) {
    #expect(JSONValue.parse(Array(text.utf8)) == nil)
  }

  /// Found by fuzzing: 229e729 was read as infinity, which encoded() writes as null.
  @Test(
    "a number no double holds is refused, never read as infinity",
    arguments: ["229e729", "-1e400", "{\"scale\":1e999}"])
  func overflowingNumber(text: String) {
    #expect(JSONValue.parse(Array(text.utf8)) == nil)
  }

  @Test("invalid UTF-8 in a string, and nesting past the depth limit, are refused")
  func bytesAndDepth() {
    #expect(JSONValue.parse([0x22, 0xFF, 0xFE, 0x22]) == nil)
    #expect(JSONValue.parse([0x22, 0xC3, 0x22]) == nil)
    let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
    #expect(JSONValue.parse(Array(deep.utf8)) == nil)
    let fine = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
    #expect(JSONValue.parse(Array(fine.utf8)) != nil)
  }

  @Test("what encoded() writes parses back to the same value")
  func roundTrip() {
    let value = JSONValue.object([
      "op": .string("image"), "text": .string("quote \" backslash \\ control \u{1} é"),
      "n": .integer(-42), "list": .array([.bool(true), .null, .number(1.5)]),
    ])
    #expect(JSONValue.parse(Array(value.encoded().utf8)) == value)
  }
}
