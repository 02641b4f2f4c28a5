extension StringProtocol {
  /// Without leading and trailing spaces, tabs and line ends (what Foundation's
  /// `trimmingCharacters(in: .whitespaces)` was used for).
  public func trimmingWhitespace() -> SubSequence {
    func isSpace(_ character: Character) -> Bool {
      character == " " || character == "\t" || character == "\r" || character == "\n"
    }
    guard let first = firstIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
    let last = lastIndex(where: { !isSpace($0) })!
    return self[first...last]
  }

  /// The text padded with spaces on the right to at least `width` characters.
  public func padded(to width: Int) -> String {
    String(self) + String(repeating: " ", count: Swift.max(0, width - count))
  }
}

/// Percent-encoding (RFC 3986): one rule for every URL thumbd writes.
public enum PercentEncoding {
  /// `text` with every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) and those in
  /// `keeping` percent-encoded, in uppercase hex: a query value (`keeping: ""`), or a file
  /// path for a `file://` URL (`keeping: "/"`, as Python's `pathlib.Path.as_uri` writes it).
  /// A path's bytes that are not UTF-8 (see `PathBytes`) are encoded as those bytes.
  public static func encode(_ text: some StringProtocol, keeping: String = "") -> String {
    let kept = Set(keeping.utf8)
    let hex = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    func add(_ byte: UInt8) {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "_"), UInt8(ascii: "~"):
        out.append(byte)
      case _ where kept.contains(byte):
        out.append(byte)
      default:
        out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
      }
    }
    // Most text holds no escaped byte: its UTF-8 is read as it is, without a copy.
    if PathBytes.holdsEscapes(text) {
      PathBytes.bytes(String(text)).forEach(add)
    } else {
      text.utf8.forEach(add)
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The `file://` URI of an absolute path as GLib writes it (`g_filename_to_uri`), which
  /// file managers hash to name a thumbnail: `!$&'()*+,:=@` stay as they are besides the
  /// unreserved bytes and `/`.
  public static func fileURI(path: some StringProtocol) -> String {
    "file://" + encode(path, keeping: "/" + glibKept)
  }

  /// A path segment (a file name) as GLib writes it inside a file URI.
  public static func glibSegment(_ name: some StringProtocol) -> String {
    encode(name, keeping: glibKept)
  }

  /// The reserved bytes GLib leaves as they are in a path (`g_filename_to_uri`).
  private static let glibKept = "!$&'()*+,:=@"
}

/// Byte counts as people write them.
public enum ByteSize {
  /// A whole number, or one with a unit (`64MiB`, `1G`, `512k`, `2 GB`; powers of 1024);
  /// nil for anything else or an overflow.
  public static func parse(_ text: some StringProtocol) -> Int? {
    let trimmed = text.trimmingWhitespace().lowercased()
    let digits = trimmed.prefix { $0.isNumber }
    guard let number = Int(digits) else { return nil }
    var unit = String(trimmed.dropFirst(digits.count).trimmingWhitespace())
    if unit.hasSuffix("ib") {
      unit.removeLast(2)
    } else if unit.hasSuffix("b") {
      unit.removeLast()
    }
    let shifts = ["": 0, "k": 10, "m": 20, "g": 30, "t": 40]
    guard let shift = shifts[unit], number <= Int.max >> shift else { return nil }
    return number << shift
  }
}
