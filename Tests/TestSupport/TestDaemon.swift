import Foundation
import Loopback
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The real `thumbd serve` binary on a temporary socket, with its own disk cache directory and
/// its log captured, started and awaited healthy.
struct TestDaemon {
  let pid: pid_t
  let socket: String
  let directory: String
  let logPath: String

  /// A fresh directory for one daemon's socket, cache and log.
  static func makeDirectory() -> String {
    let path = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-daemon-\(UUID().uuidString.prefix(8))").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }

  /// Starts the daemon with `arguments` after its socket and (unless given) cache directory;
  /// waits until /healthz answers. With `descriptorLimit`, it runs under that RLIMIT_NOFILE
  /// (soft and hard, so it cannot raise it); `wrapper` runs before it and execs it.
  static func start(
    _ arguments: [String] = [], directory: String = makeDirectory(),
    environment: [String: String] = [:], inside namespace: NetworkNamespace? = nil,
    descriptorLimit: Int? = nil, wrapper: [String] = [], binary: String = ChildProcess.thumbd
  ) async throws -> TestDaemon {
    let socket = directory + "/thumbd.sock"
    var all = ["serve", "--socket", socket]
    if !arguments.contains("--cache-dir") { all += ["--cache-dir", directory + "/cache"] }
    // Origins in tests hold downloads for as long as a test needs; on a loaded machine that
    // can pass the 5 s default, and a 504 would end them first. Tests of the timeouts set
    // their own.
    if !arguments.contains("--connect-timeout") { all += ["--connect-timeout", "120"] }
    if !arguments.contains("--request-timeout") { all += ["--request-timeout", "120"] }
    let logPath = directory + "/thumbd.log"
    // A wrapper (a filter, say) execs the daemon in its own place: the pid stays the daemon's.
    var argv = wrapper + [binary] + all + arguments
    if let limit = descriptorLimit {
      // exec keeps the pid: the test still signals and measures the daemon itself.
      argv = ["/bin/sh", "-c", "ulimit -n \(limit) && exec \"$0\" \"$@\""] + argv
    }
    let pid = try ChildProcess.spawn(
      namespace?.command(argv) ?? argv, standardError: logPath, environment: environment)
    let daemon = TestDaemon(pid: pid, socket: socket, directory: directory, logPath: logPath)
    await eventually("daemon healthy") {
      SocketClient.get(socket, "/healthz").status == 200
    }
    return daemon
  }

  /// SIGTERM, then waits; returns the exit status.
  @discardableResult
  func stop() -> Int32 {
    kill(pid, SIGTERM)
    return ChildProcess.exitStatus(ChildProcess.wait(pid))
  }

  /// What the daemon wrote on stderr so far.
  var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

  /// The daemon's /metrics text.
  var metrics: String { Self.metricsText(at: socket) }

  /// The /metrics text of the daemon listening on `socket`.
  static func metricsText(at socket: String) -> String {
    String(decoding: SocketClient.get(socket, "/metrics").response, as: UTF8.self)
  }

  /// The value of a metric line, e.g. `thumbd_stale_drops_total`.
  func metric(_ name: String) -> Double? { Self.metric(name, at: socket) }

  /// The value of a metric line of the daemon listening on `socket`: the one reader of
  /// `/metrics` the tests share.
  static func metric(_ name: String, at socket: String) -> Double? {
    for line in metricsText(at: socket).split(separator: "\n") where line.hasPrefix(name + " ") {
      return Double(line.split(separator: " ").last ?? "")
    }
    return nil
  }
}

extension TestDaemon {
  /// The daemon's resident memory now, KiB (VmRSS).
  var residentKiB: Int? { status("VmRSS:") }

  /// The daemon's peak resident memory so far, KiB (VmHWM).
  var peakResidentKiB: Int? { status("VmHWM:") }

  /// CPU seconds the daemon has used (user and system), from /proc/PID/stat.
  var cpuSeconds: Double? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = text.lastIndex(of: ")")
    else { return nil }
    // Fields after the command name: state is field 3, utime 14 and stime 15.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12])
    else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
  }

  private func status(_ field: String) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field) })
    else { return nil }
    return Int(line.split(separator: " ").dropFirst().first ?? "")
  }
}
