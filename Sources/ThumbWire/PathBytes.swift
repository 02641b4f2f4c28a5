/// Paths are bytes on Linux; a Swift `String` holds Unicode. A path whose bytes are not UTF-8
/// (a name written under a Latin-1 locale, a name from an old archive) is still a file the
/// user has, so thumbd keeps such paths in a `String` without loss, as Python does for the
/// same reason (PEP 383, "surrogateescape").
///
/// Rules kept here:
/// - Each byte of a sequence that is not UTF-8 becomes one scalar of plane 16's private use
///   area, U+10FF00 plus the byte (U+10FF80...U+10FFFF: such a byte is 0x80 or more).
/// - A name that really holds one of those 128 scalars keeps it as its four bytes, each
///   escaped, so decoding and encoding are exact inverses: any byte string comes back.
/// - Bytes enter a `String` through `string(_:)` (arguments, directory entries, lists read
///   from a file, percent-decoded URLs) and leave through `bytes(_:)` or `withCString` at
///   the system call. A path that holds no escape is spelled the same both ways, so the
///   conversions are needed only where a path meets the system.
/// - `display(_:)` is what a person reads: each escaped byte as `\xNN`.
public enum PathBytes {
  /// The first escape scalar, for byte 0x80.
  private static let escapeBase: UInt32 = 0x10FF00
  private static let escapes: ClosedRange<UInt32> = 0x10FF80...0x10FFFF

  /// The path `bytes` spells, without loss (see the type's rules).
  public static func string<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
    if let text = String(validating: bytes, as: UTF8.self),
      !text.unicodeScalars.contains(where: { escapes.contains($0.value) })
    {
      return text
    }
    var scalars = String.UnicodeScalarView()
    var parser = Unicode.UTF8.ForwardParser()
    var iterator = bytes.makeIterator()
    func escape<Encoded: Sequence<UInt8>>(_ encoded: Encoded) {
      for byte in encoded { scalars.append(Unicode.Scalar(escapeBase + UInt32(byte))!) }
    }
    // The parser reads ahead; the bytes it consumed are taken from a second cursor.
    var cursor = bytes.startIndex
    loop: while true {
      switch parser.parseScalar(from: &iterator) {
      case .valid(let encoded):
        let scalar = Unicode.UTF8.decode(encoded)
        if escapes.contains(scalar.value) { escape(encoded) } else { scalars.append(scalar) }
        cursor = bytes.index(cursor, offsetBy: encoded.count)
      case .error(let length):
        let end = bytes.index(cursor, offsetBy: length)
        escape(bytes[cursor..<end])
        cursor = end
      case .emptyInput:
        break loop
      }
    }
    return String(scalars)
  }

  /// The bytes `path` stands for: the inverse of `string(_:)`.
  public static func bytes(_ path: String) -> [UInt8] {
    guard holdsEscapes(path) else { return Array(path.utf8) }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(path.utf8.count)
    for scalar in path.unicodeScalars {
      if escapes.contains(scalar.value) {
        bytes.append(UInt8(scalar.value - escapeBase))
      } else {
        bytes.append(contentsOf: UTF8.encode(scalar)!)
      }
    }
    return bytes
  }

  /// Calls `body` with `path`'s bytes as a NUL-terminated C string, for a system call.
  public static func withCString<Result>(
    _ path: String, _ body: (UnsafePointer<CChar>) throws -> Result
  ) rethrows -> Result {
    guard holdsEscapes(path) else { return try path.withCString(body) }
    let terminated = bytes(path).map { CChar(bitPattern: $0) } + [0]
    return try terminated.withUnsafeBufferPointer { try body($0.baseAddress!) }
  }

  /// `path` for a person to read: each byte that is not UTF-8 as `\xNN`.
  public static func display(_ path: String) -> String {
    guard holdsEscapes(path) else { return path }
    var text = ""
    for scalar in path.unicodeScalars {
      if escapes.contains(scalar.value) {
        let byte = String(scalar.value - escapeBase, radix: 16, uppercase: true)
        text += "\\x" + byte
      } else {
        text.unicodeScalars.append(scalar)
      }
    }
    return text
  }

  /// The path's segments between `/` bytes, empty ones dropped. Split by bytes: split by
  /// `Character`, a `/` followed by a combining mark is one character with it, and `../\u{355}x`
  /// stays one segment that is not `..`.
  public static func segments(_ path: String) -> [Substring] {
    path.utf8.split(separator: UInt8(ascii: "/")).map { Substring($0) }
  }

  /// Whether `segment` is `.` or `..`, byte for byte.
  public static func isDotSegment(_ segment: Substring) -> Bool {
    segment.utf8.elementsEqual(".".utf8) || segment.utf8.elementsEqual("..".utf8)
  }

  /// Whether `path` holds an escaped byte: every escape is spelled F4 8F BE or F4 8F BF,
  /// then one more byte.
  public static func holdsEscapes(_ path: some StringProtocol) -> Bool {
    var last = (UInt8(0), UInt8(0))
    for byte in path.utf8 {
      if last == (0xF4, 0x8F) && (byte == 0xBE || byte == 0xBF) { return true }
      last = (last.1, byte)
    }
    return false
  }
}
