import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Runs the built `thumbd` binary and reports its exit status, output and peak RSS.
enum ChildProcess {
  /// What a finished child left behind.
  struct Outcome {
    let status: Int32
    let standardError: String
    /// Peak resident set size in KiB, from wait4's rusage.
    let maxRSSKiB: Int
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

  /// Spawns `thumbd` with the arguments and waits for it.
  static func runThumbd(_ arguments: [String]) throws -> Outcome {
    let errorFile = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-stderr-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: errorFile) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, errorFile, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let argv = ([thumbd] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, thumbd, &actions, nil, argv, environ)
    guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
    let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    let standardError = (try? String(contentsOfFile: errorFile, encoding: .utf8)) ?? ""
    return Outcome(status: exitStatus, standardError: standardError, maxRSSKiB: usage.ru_maxrss)
  }
}
