import Synchronization
import ThumbProtocol
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// Structured log lines (logfmt or JSON) on stderr or in a file that SIGHUP reopens, so
/// logrotate can move it away. Each line is one write(2), so lines never interleave.
public final class Logger: Sendable {
  /// Lines below this level are dropped.
  public let level: LogLevel
  /// How lines are written.
  public let format: LogFormat
  private let path: String?
  private let descriptor: Mutex<Int32>

  /// Logs to `path` (appending, created 0640) or, when nil, to stderr.
  public init(level: LogLevel, format: LogFormat, path: String?) throws {
    self.level = level
    self.format = format
    self.path = path
    descriptor = Mutex(try Self.open(path))
  }

  /// Reopens the log file (after rotation); stderr needs nothing.
  public func reopen() throws {
    guard path != nil else { return }
    let fresh = try Self.open(path)
    let old = descriptor.withLock { fd in
      defer { fd = fresh }
      return fd
    }
    close(old)
  }

  /// Whether lines of `level` are written: callers skip building costly fields otherwise.
  public func isEnabled(_ level: LogLevel) -> Bool { level >= self.level }

  /// Writes one line if `level` is enabled. `fields` keep their order after `ts`, `level` and
  /// `event`.
  public func log(_ level: LogLevel, _ event: String, _ fields: KeyValuePairs<String, String> = [:])
  {
    log(level, event, fields: fields.map { ($0.key, $0.value) })
  }

  /// Writes one line if `level` is enabled.
  public func log(_ level: LogLevel, _ event: String, fields: [(String, String)]) {
    guard level >= self.level else { return }
    let all = [("ts", Self.timestamp()), ("level", level.rawValue), ("event", event)] + fields
    var line: String
    switch format {
    case .logfmt:
      line = all.map { "\($0.0)=\(Self.logfmtValue($0.1))" }.joined(separator: " ")
    case .json:
      line =
        "{" + all.map { "\(JSONValue.quote($0.0)):\(JSONValue.quote($0.1))" }.joined(separator: ",")
        + "}"
    }
    line += "\n"
    let written = descriptor.withLock { fd in
      var bytes = Array(line.utf8)
      return bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress, $0.count) == $0.count }
    }
    // Nowhere to say it but the metrics: a full disk under the log file, a closed stderr.
    if !written { Self.failedWrites.add(1, ordering: .relaxed) }
  }

  private static let failedWrites = Atomic<Int>(0)

  /// Log lines that could not be written, in this process.
  public static var writeFailures: Int { failedWrites.load(ordering: .relaxed) }

  private static func open(_ path: String?) throws -> Int32 {
    guard let path else { return dup(STDERR_FILENO) }
    let fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
    guard fd >= 0 else { throw ServerError.system("open log file \(path)", errno) }
    return fd
  }

  private static func logfmtValue(_ value: String) -> String {
    let plain =
      !value.isEmpty
      && value.unicodeScalars.allSatisfy {
        $0.value > 0x20 && $0.value < 0x7F && $0 != "\"" && $0 != "=" && $0 != "\\"
      }
    return plain ? value : JSONValue.quote(value)
  }

  /// UTC, millisecond precision: `2026-11-30T20:15:02.123Z`. The part up to the seconds is
  /// formatted once per second.
  static func timestamp() -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    let prefix = secondsCache.withLock { cache -> String in
      if cache.second == now.tv_sec { return cache.text }
      var parts = tm()
      var seconds = now.tv_sec
      gmtime_r(&seconds, &parts)
      func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
      cache = (
        now.tv_sec,
        "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
          + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))."
      )
      return cache.text
    }
    let millis = now.tv_nsec / 1_000_000
    return prefix + (millis < 10 ? "00" : millis < 100 ? "0" : "") + String(millis) + "Z"
  }

  private static let secondsCache = Mutex<(second: Int, text: String)>((-1, ""))

  /// `12.345` for a duration in milliseconds, without Foundation's formatter.
  public static func milliseconds(_ duration: Duration) -> String {
    let micros =
      duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
    let fraction = micros % 1000
    return String(micros / 1000) + "." + (fraction < 10 ? "00" : fraction < 100 ? "0" : "")
      + String(fraction)
  }
}

/// How a source URL appears in logs: scheme and host, and a hash that tells sources apart
/// without printing the path or query (which may carry tokens or personal data).
public enum LogRedaction {
  /// `https://images.example.com#5f0c3a1b9e2d4c77`.
  public static func source(_ url: String) -> String {
    let hex = String(FNV1a.hash(url.utf8), radix: 16)
    let digest = String(repeating: "0", count: 16 - hex.count) + hex
    // scheme "://" [userinfo "@"] host [":" port], cut before the path, query or fragment;
    // parsed by hand because this runs for every logged request.
    let bytes = Array(url.utf8)
    guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0,
      bytes[..<colon].allSatisfy({ isSchemeByte($0) })
    else { return "invalid#" + digest }
    let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
    var authority = ""
    if bytes[(colon + 1)...].starts(with: "//".utf8) {
      let start = colon + 3
      let end =
        bytes[start...].firstIndex {
          $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
        } ?? bytes.endIndex
      var hostPart = bytes[start..<end]
      if let at = hostPart.lastIndex(of: UInt8(ascii: "@")) { hostPart = hostPart[(at + 1)...] }
      authority = String(decoding: hostPart, as: UTF8.self).lowercased()
    }
    return "\(scheme)://\(authority)#\(digest)"
  }

  private static func isSchemeByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"),
      UInt8(ascii: "."):
      return true
    default:
      return false
    }
  }
}
