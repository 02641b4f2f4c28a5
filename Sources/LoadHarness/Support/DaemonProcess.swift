import CSystem
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A `thumbd serve` started for a run on a temporary socket and cache, stopped afterwards.
public final class DaemonProcess: Sendable {
  /// Its socket.
  public let socket: String
  /// Its process id.
  public let pid: pid_t
  /// The temporary directory holding socket, cache and log.
  public let directory: String

  /// Starts `binary serve` with loopback origins allowed and waits until it is healthy.
  public init(binary: String, extraArguments: [String] = []) throws {
    directory =
      FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbload-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    socket = directory + "/thumbd.sock"
    let arguments =
      [
        binary, "serve", "--socket", socket, "--cache-dir", directory + "/cache", "--allow-private",
        "--log-level", "warn",
      ] + extraArguments
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(
      &actions, 2, directory + "/thumbd.log", O_WRONLY | O_CREAT | O_APPEND, 0o600)
    // Only the three standard descriptors: the harness's own sockets stay its own.
    _ = ts_spawn_close_from(&actions, 3)
    let argv = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let status = posix_spawn(&pid, binary, &actions, nil, argv, environ)
    guard status == 0 else {
      throw HarnessError.setup("cannot start \(binary): \(String(cString: strerror(status)))")
    }
    self.pid = pid
    for _ in 0..<400 {
      if DaemonTarget.get(socket: socket, "/healthz").hasPrefix("ok") { return }
      usleep(25_000)
    }
    kill(pid, SIGKILL)
    throw HarnessError.setup("thumbd did not become healthy; see \(directory)/thumbd.log")
  }

  /// SIGTERM, wait, remove the directory.
  public func stop() {
    kill(pid, SIGTERM)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    try? FileManager.default.removeItem(atPath: directory)
  }

  /// The `thumbd` beside this executable (both are products of one build).
  public static func siblingBinary() -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    let executable = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let candidate = URL(fileURLWithPath: executable).deletingLastPathComponent()
      .appendingPathComponent("thumbd").path
    return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
  }
}
