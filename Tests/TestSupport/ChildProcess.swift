import CSystem
import Foundation
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// Runs the built `thumbd` binary and reports its exit status, output and peak RSS.
enum ChildProcess {
  /// What a finished child left behind.
  struct Outcome {
    let status: Int32
    let standardError: String
    /// Peak resident set size in KiB, as GNU time reports it (0 unless measured).
    let maxRSSKiB: Int
    /// User plus system CPU seconds, as GNU time reports them (0 unless measured).
    var cpuSeconds: Double = 0
  }

  /// The `thumbd` executable next to the test bundle in the build folder.
  static let thumbd: String = {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    precondition(n > 0, "cannot read /proc/self/exe")
    let executable = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    var directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
    // The test binary sits inside NAME.xctest on Linux; the products are beside that.
    while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("thumbd").path)
      && directory.path != "/"
    {
      directory.deleteLastPathComponent()
    }
    return directory.appendingPathComponent("thumbd").path
  }()

  /// The release build's `thumbd` when it was built after the debug one beside the tests
  /// (`swift test` relinks the debug one whenever the code changed, and CI builds release after
  /// it), else the debug one: for load a debug daemon would take minutes over (the pipelined
  /// floods).
  static let thumbdFastest: String = {
    let debug = thumbd
    let release = URL(fileURLWithPath: debug).deletingLastPathComponent()
      .deletingLastPathComponent().appendingPathComponent("release/thumbd").path
    func modified(_ path: String) -> Date? {
      (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }
    guard let built = modified(release), let tested = modified(debug), built >= tested else {
      return debug
    }
    return release
  }()

  /// `thumbd` as it is installed (release, the Swift runtime inside), as `scripts/test`,
  /// `scripts/run` and CI build it (`thumbd_build_installed` in scripts/flags): what GNOME's
  /// sandbox, which shows `/usr` alone, can run. Never chosen by age: a release build of
  /// another kind in its place is refused by `installedProblem`, not run.
  static let installedThumbd: String = URL(fileURLWithPath: thumbd).deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("release/thumbd").path

  /// Why `installedThumbd` cannot stand in for an installed thumbd (missing, or linking the
  /// Swift runtime from outside `/usr`), naming the command that builds it; nil when it can.
  static func installedProblem() async throws -> String? {
    let build = "scripts/test builds it (or: . scripts/flags && thumbd_build_installed)"
    guard FileManager.default.isExecutableFile(atPath: installedThumbd) else {
      return "\(installedThumbd) is missing: \(build)"
    }
    let listing = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-ldd-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: listing) }
    _ = try await runThumbd([installedThumbd], standardOutput: listing, binary: "/usr/bin/ldd")
    let linked = (try? String(contentsOfFile: listing, encoding: .utf8)) ?? ""
    guard !linked.contains("libswiftCore") else {
      return "\(installedThumbd) links the Swift runtime from outside /usr: \(build)"
    }
    return nil
  }

  static let timeMarker = "THUMBD_TEST_MAXRSS_KIB="

  /// Spawns `thumbd` with the arguments and waits for it. With `measuringMemory`, it runs under
  /// GNU time: our own wait4 rusage would be useless, because on exec Linux folds the spawning
  /// process's high-water mark (this large test process) into the child's ru_maxrss. The wait
  /// runs on a thread of its own (see `exit(of:)`). `standardInput` and `standardOutput` name
  /// files for descriptors 0 and 1 (default /dev/null for output); `binary` is the thumbd
  /// to run.
  static func runThumbd(
    _ arguments: [String], measuringMemory: Bool = false, standardInput: String? = nil,
    standardOutput: String = "/dev/null", binary: String = thumbd
  ) async throws -> Outcome {
    let command =
      measuringMemory
      ? ["/usr/bin/time", "-f", timeMarker + "%M %U %S", binary] + arguments
      : [binary] + arguments
    let errorFile = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-stderr-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: errorFile) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let standardInput {
      posix_spawn_file_actions_addopen(&actions, 0, standardInput, O_RDONLY, 0)
    }
    posix_spawn_file_actions_addopen(
      &actions, 1, standardOutput, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, errorFile, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    _ = ts_spawn_close_from(&actions, 3)
    // An argument's bytes as `PathBytes` spells them: a test may name a file that is not UTF-8.
    let argv = command.map { PathBytes.withCString($0) { strdup($0) } } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
    guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
    let exitStatus = await exit(of: pid)
    var standardError = (try? String(contentsOfFile: errorFile, encoding: .utf8)) ?? ""
    var maxRSS = 0
    var cpu = 0.0
    if measuringMemory, let marker = standardError.range(of: timeMarker) {
      let fields = standardError[marker.upperBound...].split(whereSeparator: \.isWhitespace)
      maxRSS = fields.first.flatMap { Int($0) } ?? 0
      cpu = fields.dropFirst().prefix(2).compactMap { Double($0) }.reduce(0, +)
      standardError = String(standardError[..<marker.lowerBound])
    }
    return Outcome(
      status: exitStatus, standardError: standardError, maxRSSKiB: maxRSS, cpuSeconds: cpu)
  }

  /// Starts `thumbd` without waiting; stderr goes to `standardError` (default /dev/null),
  /// with `environment` added to this process's.
  static func spawnThumbd(
    _ arguments: [String], standardError: String = "/dev/null",
    environment extra: [String: String] = [:]
  ) throws -> pid_t {
    try spawn([thumbd] + arguments, standardError: standardError, environment: extra)
  }

  /// Starts a command without waiting. `inherit` is dup'ed to descriptor 3 in the child (for
  /// socket activation).
  static func spawn(
    _ command: [String], standardError: String = "/dev/null",
    environment extra: [String: String] = [:], inherit: Int32? = nil
  ) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(
      &actions, 2, standardError, O_WRONLY | O_CREAT | O_APPEND, 0o600)
    if let inherit { posix_spawn_file_actions_adddup2(&actions, inherit, 3) }
    // Nothing else of the test process: the suites run in parallel, and a descriptor another
    // test holds open at this moment would count against a child's RLIMIT_NOFILE (a daemon
    // started under `ulimit -n 48` then never became healthy) or keep its sockets alive.
    _ = ts_spawn_close_from(&actions, inherit == nil ? 3 : 4)
    let argv = command.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var merged = ProcessInfo.processInfo.environment
    for (name, value) in extra { merged[name] = value }
    let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for pointer in envp { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, envp)
    guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
    return pid
  }

  /// The exit status of a raw wait status (128 + signal when killed).
  static func exitStatus(_ status: Int32) -> Int32 {
    (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
  }

  /// Waits for a child and returns its raw wait status.
  @discardableResult
  static func wait(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return status
  }

  /// Waits for a child on a thread of its own and returns its exit status: a test awaiting a
  /// child that runs for seconds must not hold one of the few cooperative threads, or every
  /// other test's continuations (and their deadlines) stall behind it.
  static func exit(of pid: pid_t) async -> Int32 {
    let status = try? await offPool { wait(pid) }
    return exitStatus(status ?? -1)
  }

  /// The exit status if the child ends within `seconds`; otherwise nil, and the child is
  /// killed (so a test of "it stops" fails instead of hanging the suite).
  static func exit(of pid: pid_t, within seconds: Double) async -> Int32? {
    // Waits for the end without reaping it (WNOWAIT): until the reap below, the pid stays the
    // child's, so a kill at the deadline cannot reach another process that took the number.
    let ended = Task {
      try? await offPool {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
      }
    }
    let inTime = await within(seconds) { await ended.value } != nil
    if !inTime { kill(pid, SIGKILL) }
    await ended.value
    let status = try? await offPool { wait(pid) }
    return inTime ? status.map(exitStatus) : nil
  }

}

extension ChildProcess {
  /// `input` thumbnailed by the CLI in a process of its own, under GNU time: the outcome, and
  /// its peak RSS above the baseline of `thumbd --help` (the hostile-input tests' measure).
  /// The bound these tests hold is CPU seconds, which other work on the machine cannot
  /// inflate; the wall-clock `decode_timeout` (10 s by default) can be, by the rest of the
  /// suite on two cores, so it is raised to two minutes here, a guard against a hang only.
  static func thumbnailMeasured(_ input: String, size: String, output: String) async throws
    -> (run: Outcome, aboveBaselineKiB: Int)
  {
    let baseline = try await runThumbd(["--help"], measuringMemory: true).maxRSSKiB
    let run = try await runThumbd(
      ["thumbnail", input, "--size", size, "--decode-timeout", "120", "-o", output],
      measuringMemory: true)
    return (run, run.maxRSSKiB - baseline)
  }

  /// With `THUMBD_WRITE_FUZZ_SEEDS=DIR` set, keeps `bytes` (when under `limit`) in DIR as a
  /// fuzz seed named after `name` (Tests/Fuzz/<target>/ holds those kept).
  static func keepAsFuzzSeed(_ bytes: [UInt8], name: String, limit: Int = 1 << 16) throws {
    guard let seeds = ProcessInfo.processInfo.environment["THUMBD_WRITE_FUZZ_SEEDS"],
      bytes.count < limit
    else { return }
    let slug = name.lowercased().map { $0.isLetter || $0.isNumber ? $0 : "-" }
    try Data(bytes).write(to: URL(fileURLWithPath: seeds + "/seed-" + String(slug.prefix(48))))
  }
}
