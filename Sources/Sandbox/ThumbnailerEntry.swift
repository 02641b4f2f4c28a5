import ThumbSystem
import ThumbWire

/// An installed `*.thumbnailer` entry: the desktop's shared way to add a file type
/// (ffmpegthumbnailer, evince, gdk-pixbuf, librsvg, gnome-font-viewer ship one). Parsed
/// strictly; its `Exec` line is split into arguments as the Desktop Entry Specification
/// says, never handed to a shell.
///
/// Rules kept here:
/// - only the `[Thumbnailer Entry]` group is read, and in it only `TryExec`, `Exec` and
///   `MimeType` (localised keys and other groups are skipped); a key given twice, a line
///   that is neither a key, a group, a comment nor blank, or text past the limits refuses
///   the whole entry;
/// - `Exec` needs an input (`%u` or `%i`) and the output (`%o`), and knows `%s` and `%%`;
///   any other field code refuses the entry;
/// - a MIME type is `type/subtype` of token characters, lower-cased.
public struct ThumbnailerEntry: Sendable, Equatable {
  /// The file the entry came from.
  public var source: String
  /// `TryExec`, as written: the entry applies only when this program exists.
  public var tryExec: String?
  /// `Exec`, split into arguments; field codes still in place.
  public var arguments: [String]
  /// The MIME types it claims, lower-cased, in the order given.
  public var mimeTypes: [String]

  /// The largest entry file read.
  public static let maxBytes = 65_536
  /// The most MIME types one entry may claim.
  public static let maxTypes = 512
  /// The most arguments an `Exec` line may have.
  public static let maxArguments = 64

  /// Why an entry was refused.
  public struct Refusal: Error, Equatable, CustomStringConvertible {
    /// What was wrong, naming the line where there is one.
    public let reason: String
    /// The reason.
    public var description: String { reason }
  }

  /// Parses the text of an entry from `source`.
  public static func parse(_ bytes: [UInt8], source: String) throws(Refusal) -> ThumbnailerEntry {
    guard bytes.count <= maxBytes else { throw Refusal(reason: "over \(maxBytes) bytes") }
    guard String(validating: bytes, as: UTF8.self) != nil else {
      throw Refusal(reason: "not UTF-8")
    }
    var inGroup = false
    var sawGroup = false
    var values: [String: String] = [:]
    // Lines by their bytes: a String would take "\r\n" as one character.
    for (index, rawLine) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
      .enumerated()
    {
      let line = Substring(
        String(decoding: rawLine.last == 0x0D ? rawLine.dropLast() : rawLine, as: UTF8.self))
      let number = index + 1
      if line.allSatisfy({ $0 == " " || $0 == "\t" }) || line.hasPrefix("#") { continue }
      if line.hasPrefix("[") {
        guard line.hasSuffix("]"), line.count > 2 else {
          throw Refusal(reason: "line \(number): a group header without its ]")
        }
        let name = line.dropFirst().dropLast()
        if name == "Thumbnailer Entry" {
          guard !sawGroup else { throw Refusal(reason: "line \(number): the group twice") }
          sawGroup = true
          inGroup = true
        } else {
          inGroup = false
        }
        continue
      }
      guard let equals = line.firstIndex(of: "=") else {
        throw Refusal(reason: "line \(number): neither a key, a group nor a comment")
      }
      let key = String(line[..<equals].trimmingSpaces())
      guard !key.isEmpty,
        key.utf8.allSatisfy({ isKeyByte($0) })
      else { throw Refusal(reason: "line \(number): a key of other characters") }
      guard inGroup, ["TryExec", "Exec", "MimeType"].contains(key) else { continue }
      guard values[key] == nil else { throw Refusal(reason: "line \(number): \(key) twice") }
      values[key] = String(line[line.index(after: equals)...].trimmingSpaces())
    }
    guard sawGroup else { throw Refusal(reason: "no [Thumbnailer Entry] group") }
    guard let exec = values["Exec"], !exec.isEmpty else { throw Refusal(reason: "no Exec") }
    guard let mime = values["MimeType"] else { throw Refusal(reason: "no MimeType") }
    let arguments = try splitExec(try unescape(exec))
    let types = try mimeTypes(mime)
    guard !types.isEmpty else { throw Refusal(reason: "MimeType lists no type") }
    let tryExec = try values["TryExec"].map { value throws(Refusal) in try unescape(value) }
    return ThumbnailerEntry(
      source: source, tryExec: tryExec?.isEmpty == true ? nil : tryExec, arguments: arguments,
      mimeTypes: types)
  }

  /// The program `Exec` names: its first argument.
  public var program: String { arguments[0] }

  /// `Exec`'s arguments for one run: `%i` the input's path, `%u` its `file://` URI, `%o` the
  /// output's path, `%s` the size in pixels, `%%` a percent sign. Each argument stays one
  /// argument, whatever the values hold.
  public func expand(input: String, output: String, size: Int) -> [String] {
    arguments.map { argument in
      var result = ""
      var iterator = argument.makeIterator()
      while let character = iterator.next() {
        guard character == "%" else {
          result.append(character)
          continue
        }
        // parse() admitted only these codes.
        switch iterator.next() {
        case "i": result += input
        case "u": result += PercentEncoding.fileURI(path: input)
        case "o": result += output
        case "s": result += String(size)
        default: result += "%"
        }
      }
      return result
    }
  }

  // MARK: - The grammar

  private static func isKeyByte(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D: true
    // A localised key, Name[de]: read, then skipped.
    case 0x5B, 0x5D, 0x40, 0x5F, 0x2E: true
    default: false
    }
  }

  /// A string value's escapes: `\s \n \t \r \\`; any other is refused.
  static func unescape(_ value: String) throws(Refusal) -> String {
    var result = ""
    var iterator = value.makeIterator()
    while let character = iterator.next() {
      guard character == "\\" else {
        guard character.asciiValue.map({ $0 >= 0x20 }) ?? true else {
          throw Refusal(reason: "a control character in a value")
        }
        result.append(character)
        continue
      }
      switch iterator.next() {
      case "s": result.append(" ")
      case "n": result.append("\n")
      case "t": result.append("\t")
      case "r": result.append("\r")
      case "\\": result.append("\\")
      default: throw Refusal(reason: "an unknown escape in a value")
      }
    }
    return result
  }

  /// `Exec`'s arguments: split at unquoted spaces; inside double quotes, `\"`, `` \` ``,
  /// `\$` and `\\` stand for the character, and the reserved characters are allowed.
  static func splitExec(_ exec: String) throws(Refusal) -> [String] {
    var arguments: [String] = []
    var current = ""
    var started = false
    var quoted = false
    var iterator = exec.makeIterator()
    while let character = iterator.next() {
      if quoted {
        switch character {
        case "\"": quoted = false
        case "\\":
          guard let next = iterator.next(), "\"`$\\".contains(next) else {
            throw Refusal(reason: "Exec: an unknown escape inside quotes")
          }
          current.append(next)
        default: current.append(character)
        }
        continue
      }
      switch character {
      case " ", "\t":
        if started { arguments.append(current) }
        (current, started) = ("", false)
      case "\"":
        quoted = true
        started = true
      // Characters a shell would read; the specification reserves them outside quotes.
      case "\\", "'", ">", "<", "~", "|", "&", ";", "$", "*", "?", "#", "(", ")", "`", "\n":
        throw Refusal(reason: "Exec: a reserved character outside quotes")
      default:
        current.append(character)
        started = true
      }
      guard arguments.count < maxArguments, current.utf8.count < 4_096 else {
        throw Refusal(reason: "Exec: too many arguments or one too long")
      }
    }
    guard !quoted else { throw Refusal(reason: "Exec: a quote left open") }
    if started { arguments.append(current) }
    guard let first = arguments.first, !first.isEmpty, !first.contains("%") else {
      throw Refusal(reason: "Exec: no program")
    }
    var input = false
    var output = false
    for argument in arguments {
      var iterator = argument.makeIterator()
      while let character = iterator.next() {
        guard character == "%" else { continue }
        switch iterator.next() {
        case "i", "u": input = true
        case "o": output = true
        case "s", "%": break
        default: throw Refusal(reason: "Exec: a field code thumbd does not know")
        }
      }
    }
    guard input else { throw Refusal(reason: "Exec: no input (%i or %u)") }
    guard output else { throw Refusal(reason: "Exec: no output (%o)") }
    return arguments
  }

  /// `MimeType`'s list: `;`-separated, a trailing `;` allowed.
  static func mimeTypes(_ value: String) throws(Refusal) -> [String] {
    var types: [String] = []
    for part in value.split(separator: ";") where !part.isEmpty {
      let type = part.lowercased()
      let halves = type.split(separator: "/", omittingEmptySubsequences: false)
      guard halves.count == 2, halves.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(isTokenByte) })
      else { throw Refusal(reason: "MimeType: \(part.prefix(64)) is not type/subtype") }
      guard types.count < maxTypes else { throw Refusal(reason: "MimeType: over \(maxTypes)") }
      if !types.contains(type) { types.append(type) }
    }
    return types
  }

  private static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x61...0x7A, 0x41...0x5A: true
    case 0x21, 0x23, 0x24, 0x26, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
    default: false
    }
  }
}

extension Substring {
  fileprivate func trimmingSpaces() -> Substring {
    var result = self
    while result.first == " " || result.first == "\t" { result = result.dropFirst() }
    while result.last == " " || result.last == "\t" { result = result.dropLast() }
    return result
  }
}
