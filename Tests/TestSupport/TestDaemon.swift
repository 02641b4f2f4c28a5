import Foundation
import ImagePipeline
import Loopback
import Synchronization
import Testing
import ThumbServer

#if canImport(Glibc)
  import Glibc
#endif

/// How a test runs its daemon, one client API for both (as HummingbirdTesting runs one
/// application live or in-process):
/// - `.process`: the real `thumbd serve` binary, for what only a process shows: signals, its
///   memory and CPU, the CLI, crashes, sandboxed workers beside the binary;
/// - `.inProcess`: the same `Daemon` that binary builds, from the same arguments through the
///   same `ConfigLoader`, listening on the same kind of socket inside the test's process, for
///   what needs no process (no process to leave behind). Its work shares the test's
///   cooperative pool (a thread per core), so a test of one never blocks a pool thread waiting
///   for it: its clients are `ThumbClient`, or blocking calls moved off the pool
///   (`awaitMetric`, `offPool`); answers given on the loop thread (`/healthz`, a memory hit)
///   need no pool thread. That pool is also every other test's: a test anywhere that blocks
///   one of its threads starves every in-process daemon (two blocked at once, on two cores,
///   stopped a session test's daemon for two minutes), so `PoolGuard` fails such a test, and
///   suites whose tests block run on a lane (`.onLane(.clients)`).
enum DaemonDriver: Sendable {
  case process
  case inProcess
}

/// A daemon on a temporary socket, with its own disk cache directory and its log captured,
/// started and awaited healthy: the real binary, or the same `Daemon` in-process
/// (`DaemonDriver`).
struct TestDaemon {
  /// How it runs.
  private let running: Running
  let socket: String
  let directory: String
  let logPath: String

  private enum Running {
    case process(pid_t)
    case inProcess(Daemon)
  }

  /// The `Daemon` of an in-process one (nil for a process).
  var inProcessDaemon: Daemon? {
    if case .inProcess(let daemon) = running { return daemon }
    return nil
  }

  /// The daemon process's id (only a `.process` daemon has one of its own).
  var pid: pid_t {
    guard case .process(let pid) = running else {
      preconditionFailure("an in-process daemon has no process of its own: use .process")
    }
    return pid
  }

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
    _ arguments: [String] = [], driver: DaemonDriver = .process,
    directory: String = makeDirectory(), environment: [String: String] = [:],
    inside namespace: NetworkNamespace? = nil, descriptorLimit: Int? = nil,
    wrapper: [String] = [], binary: String = ChildProcess.thumbd
  ) async throws -> TestDaemon {
    PoolGuard.installed
    let socket = directory + "/thumbd.sock"
    var all = ["serve", "--socket", socket]
    if !arguments.contains("--cache-dir") { all += ["--cache-dir", directory + "/cache"] }
    // Origins in tests hold downloads for as long as a test needs; on a loaded machine that
    // can pass the 5 s default, and a 504 would end them first. Tests of the timeouts set
    // their own.
    if !arguments.contains("--connect-timeout") { all += ["--connect-timeout", "120"] }
    if !arguments.contains("--request-timeout") { all += ["--request-timeout", "120"] }
    let logPath = directory + "/thumbd.log"
    if driver == .inProcess {
      precondition(
        namespace == nil && descriptorLimit == nil && wrapper.isEmpty
          && binary == ChildProcess.thumbd,
        "namespaces, limits, wrappers and other binaries need a process")
      return try await startInProcess(
        Array((all + arguments).dropFirst()), environment: environment, socket: socket,
        directory: directory, logPath: logPath)
    }
    // A wrapper (a filter, say) execs the daemon in its own place: the pid stays the daemon's.
    var argv = wrapper + [binary] + all + arguments
    if let limit = descriptorLimit {
      // exec keeps the pid: the test still signals and measures the daemon itself.
      argv = ["/bin/sh", "-c", "ulimit -n \(limit) && exec \"$0\" \"$@\""] + argv
    }
    let pid = try ChildProcess.spawn(
      namespace?.command(argv) ?? argv, standardError: logPath, environment: environment)
    let daemon = TestDaemon(
      running: .process(pid), socket: socket, directory: directory, logPath: logPath)
    await eventually("daemon healthy") { await Self.healthy(socket) }
    return daemon
  }

  /// `thumbd serve`'s own steps, in this process: the arguments read by `ConfigLoader`, the
  /// log written to `logPath`, the `Daemon` built, listening and started.
  private static func startInProcess(
    _ arguments: [String], environment: [String: String], socket: String, directory: String,
    logPath: String
  ) async throws -> TestDaemon {
    guard
      case .serve(let config, _) = try ConfigLoader.load(
        arguments: arguments, environment: environment)
    else { throw InProcessError(message: "the arguments ask for help, not a daemon") }
    let logger = try Logger(level: config.logLevel, format: config.logFormat, path: logPath)
    // A restart on the same cache waits for the stopped daemon's last reference to let go of
    // the cache's lock, as `reopenedCache` does: a new process would find it free at once.
    var made: Result<Daemon, any Error>?
    await eventually("the cache directory is free for a restart") {
      do {
        made = .success(try Daemon(config: config, logger: logger, version: "test"))
      } catch DiskCacheError.inUse {
        return false
      } catch {
        made = .failure(error)
      }
      return true
    }
    guard let made else { throw InProcessError(message: "the cache directory stayed in use") }
    let daemon = try made.get()
    let endpoints = try daemon.listenOnConfiguredEndpoints()
    // The line `thumbd serve` writes, which tests read (a TCP listener's port, say).
    logger.log(.info, "listening", ["endpoints": endpoints.joined(separator: ",")])
    daemon.start()
    let started = TestDaemon(
      running: .inProcess(daemon), socket: socket, directory: directory, logPath: logPath)
    await eventually("daemon healthy") { await Self.healthy(socket) }
    return started
  }

  /// Whether the daemon on `socket` answers /healthz, asked off the cooperative pool.
  static func healthy(_ socket: String) async -> Bool {
    (try? await offPool { SocketClient.get(socket, "/healthz").status }) == 200
  }

  struct InProcessError: Error {
    let message: String
  }

  /// Stops it: SIGTERM and the process's exit status, or, in-process, the drain `thumbd
  /// serve` runs on SIGTERM, then 0 once its loops have ended.
  @discardableResult
  func stop() -> Int32 {
    switch running {
    case .process(let pid):
      kill(pid, SIGTERM)
      return ChildProcess.exitStatus(ChildProcess.wait(pid))
    case .inProcess(let daemon):
      daemon.stop(drainTimeout: 0)
      daemon.server.wait()
      unlink(socket)
      return 0
    }
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

  /// `metric`, read on a thread of its own: what a test awaits from an in-process daemon,
  /// whose answer to `/metrics` runs on the cooperative pool the test would otherwise block.
  func awaitMetric(_ name: String) async -> Double? {
    let socket = socket
    return try? await offPool { Self.metric(name, at: socket) }
  }

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

/// Runs `body` with a daemon started by `driver` from `arguments`, and stops it after, however
/// `body` ends.
func withDaemon<T>(
  _ driver: DaemonDriver, _ arguments: [String] = [],
  _ body: (TestDaemon) async throws -> T
) async throws -> T {
  let daemon = try await TestDaemon.start(arguments, driver: driver)
  defer { daemon.stop() }
  return try await body(daemon)
}
