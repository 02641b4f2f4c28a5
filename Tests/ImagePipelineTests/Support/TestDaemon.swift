import Foundation
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
  /// waits until /healthz answers.
  static func start(
    _ arguments: [String] = [], directory: String = makeDirectory(),
    environment: [String: String] = [:], inside namespace: NetworkNamespace? = nil
  ) async throws -> TestDaemon {
    let socket = directory + "/thumbd.sock"
    var all = ["serve", "--socket", socket]
    if !arguments.contains("--cache-dir") { all += ["--cache-dir", directory + "/cache"] }
    let logPath = directory + "/thumbd.log"
    let argv = [ChildProcess.thumbd] + all + arguments
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
  var metrics: String {
    String(decoding: SocketClient.get(socket, "/metrics").response, as: UTF8.self)
  }

  /// The value of a metric line, e.g. `thumbd_stale_drops_total`.
  func metric(_ name: String) -> Double? {
    for line in metrics.split(separator: "\n") where line.hasPrefix(name + " ") {
      return Double(line.split(separator: " ").last ?? "")
    }
    return nil
  }
}
