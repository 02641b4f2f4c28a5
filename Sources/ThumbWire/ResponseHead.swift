/// A response's status and header fields, parsed from the text of its head (status line and
/// header lines, CRLF-separated). Pure: no I/O, so it is unit-tested and fuzzed on its own.
public struct ResponseHead: Sendable, Hashable {
  /// The status code, 100...599.
  public var status: Int
  /// Header fields in order; names lower-cased, values trimmed.
  public var fields: [Field]

  /// One header field.
  public struct Field: Sendable, Hashable {
    /// The lower-cased name.
    public var name: String
    /// The value without surrounding whitespace.
    public var value: String

    /// Creates a field.
    public init(name: String, value: String) {
      self.name = name
      self.value = value
    }
  }

  /// Creates a head.
  public init(status: Int, fields: [Field] = []) {
    self.status = status
    self.fields = fields
  }

  /// Why a head is refused.
  public struct ParseError: Error, Sendable, Hashable {
    /// What is wrong.
    public let message: String
  }

  /// Parses `HTTP/1.x CODE reason` or `HTTP/2 CODE`, then `name: value` lines. Obsolete line
  /// folding, bytes that may not stand in a field, and conflicting `Content-Length` values
  /// (RFC 9112, section 6.3: a request-smuggling hazard) are errors.
  public init(parsing text: some Collection<UInt8>) throws(ParseError) {
    let lines = Self.lines(Array(text))
    guard let statusLine = lines.first else { throw ParseError(message: "empty response head") }
    let parts = statusLine.split(separator: UInt8(ascii: " "), maxSplits: 2)
    guard parts.count >= 2, parts[0].starts(with: "HTTP/".utf8), parts[1].count == 3,
      parts[1].allSatisfy({ $0 >= 48 && $0 <= 57 }),
      let code = Int(String(decoding: parts[1], as: UTF8.self)), (100...599).contains(code)
    else { throw ParseError(message: "malformed status line") }
    status = code
    fields = []
    for line in lines.dropFirst() where !line.isEmpty {
      guard line.first != UInt8(ascii: " "), line.first != UInt8(ascii: "\t") else {
        throw ParseError(message: "obsolete line folding")
      }
      guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
        line[..<colon].allSatisfy(HTTPSyntax.isTokenByte)
      else { throw ParseError(message: "malformed header line") }
      var value = line[(colon + 1)...]
      while let b = value.first, b == 32 || b == 9 { value = value.dropFirst() }
      while let b = value.last, b == 32 || b == 9 { value = value.dropLast() }
      guard value.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else {
        throw ParseError(message: "control bytes in a header value")
      }
      fields.append(
        Field(
          name: String(decoding: line[..<colon], as: UTF8.self).lowercased(),
          value: String(decoding: value, as: UTF8.self)))
    }
    _ = try declaredLength()
  }

  /// The first value of a field.
  public func value(_ name: String) -> String? {
    fields.first { $0.name == name }?.value
  }

  /// The body length the origin declares, if it declares one. Repeated `Content-Length`
  /// fields (or comma lists) must agree; a length beside `Transfer-Encoding` is refused.
  public func declaredLength() throws(ParseError) -> Int? {
    var length: Int?
    for field in fields where field.name == "content-length" {
      for item in field.value.split(separator: ",", omittingEmptySubsequences: false) {
        let text = item.trimmingWhitespace()
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
          let value = Int(text)
        else { throw ParseError(message: "invalid Content-Length") }
        guard length == nil || length == value else {
          throw ParseError(message: "conflicting Content-Length values")
        }
        length = value
      }
    }
    if length != nil && fields.contains(where: { $0.name == "transfer-encoding" }) {
      throw ParseError(message: "Content-Length beside Transfer-Encoding")
    }
    return length
  }

  /// Seconds the origin asks to wait before trying again (`Retry-After`: delay-seconds or an
  /// HTTP date, judged against `now`, seconds since 1970).
  public func retryAfter(now: Double) -> Double? {
    guard let text = value("retry-after") else { return nil }
    if let seconds = Int(text), seconds >= 0 { return Double(seconds) }
    guard let date = HTTPDate.parse(text) else { return nil }
    return max(0, date - now)
  }

  private static func lines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
    var lines: [ArraySlice<UInt8>] = []
    var start = 0
    for index in bytes.indices where bytes[index] == 10 {
      var end = index
      if end > start && bytes[end - 1] == 13 { end -= 1 }
      lines.append(bytes[start..<end])
      start = index + 1
    }
    if start < bytes.count { lines.append(bytes[start...]) }
    return lines
  }

}

/// HTTP dates (RFC 9110, section 5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime
/// forms a recipient must accept. Seconds since 1970, UTC.
public enum HTTPDate {
  private static let months = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
  ]

  /// Parses a date in one of the three forms of RFC 9110, section 5.6.7, exactly: digit
  /// counts, names and separators as written there (names in any case); nil otherwise. Strict
  /// because whatever an origin sends becomes a wait: a lenient reader took "0026" for a year
  /// and could overflow on a long one (found by fuzzing).
  public static func parse(_ text: String) -> Double? {
    let words = text.split(separator: " ").map { $0.lowercased() }
    let weekdays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    let longWeekdays = [
      "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    ]
    switch words.count {
    case 6:
      // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
      guard words[0].hasSuffix(","), weekdays.contains(String(words[0].dropLast())),
        words[5] == "gmt", let day = digits(words[1], 2), let month = month(words[2]),
        let year = digits(words[3], 4)
      else { return nil }
      return seconds(year: year, month: month, day: day, time: words[4])
    case 4:
      // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT (two-digit years up to 69 are 20xx)
      let date = words[1].split(separator: "-", omittingEmptySubsequences: false)
      guard words[0].hasSuffix(","), longWeekdays.contains(String(words[0].dropLast())),
        words[3] == "gmt", date.count == 3, let day = digits(date[0], 2),
        let month = month(date[1]), let short = digits(date[2], 2)
      else { return nil }
      return seconds(
        year: short < 70 ? 2000 + short : 1900 + short, month: month, day: day, time: words[2])
    case 5:
      // asctime: Sun Nov  6 08:49:37 1994
      guard weekdays.contains(words[0]), let month = month(words[1]),
        let day = digits(words[2], 1) ?? digits(words[2], 2), let year = digits(words[4], 4)
      else { return nil }
      return seconds(year: year, month: month, day: day, time: words[3])
    default:
      return nil
    }
  }

  /// `count` ASCII digits exactly, as a number.
  private static func digits(_ word: some StringProtocol, _ count: Int) -> Int? {
    guard word.utf8.count == count, word.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
      return nil
    }
    return Int(word)
  }

  private static func month(_ word: some StringProtocol) -> Int? {
    months.firstIndex(of: String(word)).map { $0 + 1 }
  }

  /// Seconds since 1970 of a checked date and an `hh:mm:ss` time.
  private static func seconds(year: Int, month: Int, day: Int, time: String) -> Double? {
    let clock = time.split(separator: ":", omittingEmptySubsequences: false)
    guard (1...31).contains(day), clock.count == 3, let hour = digits(clock[0], 2),
      let minute = digits(clock[1], 2), let second = digits(clock[2], 2), hour < 24, minute < 60,
      second < 61
    else { return nil }
    let days = daysFromCivil(year: year, month: month, day: day)
    return Double(days * 86_400 + hour * 3600 + minute * 60 + second)
  }

  /// The IMF-fixdate form of `seconds` since 1970. Written byte by byte: it goes into every
  /// thumbnail response that has a `Last-Modified`.
  /// Times outside years 0...9999 (which no HTTP date can name) print as the nearest bound.
  public static func format(_ seconds: Double) -> String {
    let bound = 253_402_300_799.0  // 9999-12-31 23:59:59
    let clamped = seconds.isNaN ? 0 : min(max(seconds, -62_167_219_200), bound)
    let total = Int(clamped.rounded(.down))
    let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
    let rest = total - days * 86_400
    let (year, month, day) = civil(fromDays: days)
    var out: [UInt8] = []
    out.reserveCapacity(32)
    out += weekdayNames[((days % 7) + 7) % 7]
    out += [44, 32]  // ", "
    func two(_ value: Int) { out += [UInt8(48 + value / 10 % 10), UInt8(48 + value % 10)] }
    two(day)
    out.append(32)
    out += monthNames[month - 1]
    out.append(32)
    let digits = Array(String(year).utf8)
    if digits.count < 4 { out += [UInt8](repeating: 48, count: 4 - digits.count) }
    out += digits
    out.append(32)
    two(rest / 3600)
    out.append(58)
    two(rest / 60 % 60)
    out.append(58)
    two(rest % 60)
    out += Array(" GMT".utf8)
    return String(decoding: out, as: UTF8.self)
  }

  private static let weekdayNames = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"].map {
    Array($0.utf8)
  }
  private static let monthNames = months.map {
    Array($0.prefix(1).uppercased().utf8) + Array($0.dropFirst().utf8)
  }

  /// Days since 1970-01-01 of a proleptic Gregorian date.
  static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
  }

  /// The date of a day count since 1970-01-01.
  static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp + (mp < 10 ? 3 : -9)
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
  }
}
