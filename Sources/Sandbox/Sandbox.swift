import CSystem
import Synchronization
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Where a program from outside thumbd runs: a bubblewrap sandbox, as gnome-desktop runs a
/// `.thumbnailer` entry, with thumbd's own seccomp filter, resource limits and a deadline.
///
/// Rules kept here:
/// - the child sees `/usr` (and the `/bin`, `/lib*`, `/sbin` that lead into it) and a few
///   files of `/etc` read-only, its one input read-only at ``SandboxJob/inputPath``, an
///   empty output folder at ``outputFolder``, and a private `/tmp`; no network, no other
///   process, no other user's or the daemon's files;
/// - it gets a minimal environment, no descriptor but the filter's, and no terminal;
/// - it runs under ``SandboxLimits`` from its first instruction, and its whole process group
///   is killed at the deadline, on cancellation, or when the daemon dies;
/// - under a daemon run as root it runs as an unprivileged user (`nobody`), so the process
///   limit holds; that user must then be able to reach and read the input;
/// - nothing it writes is trusted: the caller reads ``SandboxRun/outputFolder`` with its own
///   bounds and then calls ``SandboxRun/discard()``.
public final class Sandbox: Sendable {
  /// The child's output folder, inside the sandbox.
  public static let outputFolder = "/thumbd/out"

  /// The folder the input is bound into, inside the sandbox.
  public static let inputFolder = "/thumbd"

  /// util-linux's `prlimit`, which sets the process limit inside the sandbox.
  public static let prlimit = "/usr/bin/prlimit"

  /// The user a child runs as when the daemon is root: `nobody`.
  public static let unprivilegedUser: Int64 = 65_534

  /// The bubblewrap program.
  public let bwrap: String
  /// Where each run's output folder is made, on the host.
  public let workFolder: String
  /// The limits every run gets.
  public let limits: SandboxLimits
  /// The user children run as, or nil for the daemon's own.
  public let runAs: Int64?
  /// Runs started in this process, over every sandbox: run folders are named by it, and two
  /// sandboxes (the video worker's, the installed thumbnailers') share a work folder.
  private static let runs = Atomic<UInt64>(0)
  /// Names tried for one run's folder at most, past folders an earlier process of the same
  /// number left behind.
  static let folderTries = 16

  /// A sandbox whose children run `bwrap` and write into folders made under `workFolder`
  /// (made here, 0700). Nothing is checked: ``probe()`` says whether it works here.
  public init(bwrap: String, workFolder: String, limits: SandboxLimits = SandboxLimits()) {
    self.bwrap = bwrap
    self.workFolder = workFolder
    self.limits = limits
    runAs = getuid() == 0 ? Self.unprivilegedUser : nil
  }

  /// Where runs' output folders go by default: the user's runtime folder (a tmpfs of the
  /// user's own), else `/run` for root, else the system's temporary folder; each in a
  /// `thumbd-sandbox` folder that must be the caller's own.
  public static func defaultWorkFolder(environment: [String: String]) -> String {
    if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"), getuid() != 0 {
      return runtime + "/thumbd-sandbox"
    }
    return (getuid() == 0 ? "/run" : "/tmp") + "/thumbd-sandbox-\(getuid())"
  }

  /// Whether a child can be given the file at `path` (absolute): always for the daemon's own
  /// user; under root, where children run as `nobody`, only when every folder on the way
  /// lets others pass and the file lets others read (bubblewrap binds it by its path).
  public func canReach(_ path: String) -> Bool {
    guard runAs != nil else { return true }
    var folder = ""
    let parts = path.split(separator: "/")
    for (index, part) in parts.enumerated() {
      folder += "/" + part
      guard let status = SystemFiles.status(folder) else { return false }
      let last = index == parts.count - 1
      guard status.st_mode & (last ? S_IROTH : S_IXOTH) != 0 else { return false }
    }
    return true
  }

  /// The first `bwrap` on the standard program folders, or nil.
  public static func findBubblewrap() -> String? {
    ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"].first { access($0, X_OK) == 0 }
  }

  /// Why delegated work cannot run here, or nil when a sandboxed child runs: bubblewrap is
  /// started once with the full setup and `/usr/bin/true` as its program.
  public func probe() -> String? {
    guard access(bwrap, X_OK) == 0 else {
      return "bubblewrap (\(bwrap)) is not installed: install the bubblewrap package"
    }
    for program in ["/usr/bin/true", Self.prlimit] where access(program, X_OK) != 0 {
      return "\(program) is missing (util-linux and coreutils provide it)"
    }
    let run = run(SandboxJob(arguments: ["/usr/bin/true"]), cancellation: nil)
    defer { run.discard() }
    switch run.outcome {
    case .exited(0): return nil
    case .failedToStart(let reason): return "bubblewrap could not start: \(reason)"
    default:
      return
        "bubblewrap cannot make a sandbox here (\(run.outcome)): user namespaces may be disabled (kernel.unprivileged_userns_clone, or an AppArmor rule for bwrap)"
    }
  }

  /// Runs `job` to its end, its deadline or the calling task's cancellation, on a thread of
  /// its own (the cooperative pool is never blocked).
  public func run(_ job: SandboxJob) async -> SandboxRun {
    let cancellation = SandboxCancellation()
    return await withTaskCancellationHandler {
      await SystemThread.run(name: "thumbd-sandbox") { [self] in
        self.run(job, cancellation: cancellation)
      }
    } onCancel: {
      cancellation.cancel()
    }
  }

  /// Runs `job` to its end, its deadline or `cancellation`, blocking the calling thread.
  public func run(_ job: SandboxJob, cancellation: SandboxCancellation?) -> SandboxRun {
    CooperativePool.willBlock("Sandbox.run")
    let number = Self.runs.add(1, ordering: .relaxed).newValue
    var output = "\(workFolder)/run-\(getpid())-\(number)"
    let started = ContinuousClock.now
    let messages = ts_memory_file()
    defer { if messages >= 0 { close(messages) } }
    let outcome = runBlocking(
      job, output: &output, wake: cancellation?.descriptor ?? -1, messages: messages)
    return SandboxRun(
      outcome: outcome, outputFolder: output, elapsed: ContinuousClock.now - started,
      messages: Self.head(of: messages))
  }

  /// The first bytes the child wrote to its stdout and stderr, as text.
  static func head(of file: Int32) -> String {
    guard file >= 0 else { return "" }
    var bytes = [UInt8](repeating: 0, count: SandboxRun.messageLimit)
    let count = pread(file, &bytes, bytes.count, 0)
    return count > 0 ? String(decoding: bytes[..<count], as: UTF8.self) : ""
  }

  /// Starts `job` and returns at once: a child that lives across many pieces of work (a
  /// server, `FrameServers`), waited for and ended by its owner through the returned
  /// ``SandboxProcess``. The limits hold as for ``run(_:cancellation:)``, but the deadline is
  /// the owner's to keep.
  public func launch(_ job: SandboxJob) -> Result<SandboxProcess, SandboxLaunchFailure> {
    // A child's death signal (it dies with the daemon) follows the thread that forked it, not
    // the process: one that outlives this call is forked from a thread that never ends.
    Self.launcher.perform { [self] in launchHere(job) }
  }

  /// The thread every ``launch(_:)`` forks from.
  private static let launcher = LaunchThread()

  private func launchHere(_ job: SandboxJob) -> Result<SandboxProcess, SandboxLaunchFailure> {
    let number = Self.runs.add(1, ordering: .relaxed).newValue
    var output = "\(workFolder)/run-\(getpid())-\(number)"
    let messages = ts_memory_file()
    switch spawn(job, output: &output, messages: messages) {
    case .success(let pid):
      return .success(SandboxProcess(pid: pid, outputFolder: output, messages: messages))
    case .failure(let failure):
      if messages >= 0 { close(messages) }
      _ = ts_remove_tree(output, 16, 100_000)
      return .failure(failure)
    }
  }

  /// Runs `job` with its output folder at `output`, or at the next free name, which `output`
  /// then holds.
  private func runBlocking(
    _ job: SandboxJob, output: inout String, wake: Int32, messages: Int32
  ) -> SandboxOutcome {
    let pid: pid_t
    switch spawn(job, output: &output, messages: messages) {
    case .success(let started): pid = started
    case .failure(let failure): return .failedToStart(failure.reason)
    }
    let handle = ts_child_handle(pid)
    defer { if handle >= 0 { close(handle) } }
    let deadline = ContinuousClock.now + limits.deadline
    var ending: SandboxOutcome?
    while ending == nil {
      let left = deadline - ContinuousClock.now
      if left <= .zero {
        ending = .timedOut
        break
      }
      // Without a pidfd (an old kernel), the wait looks at the child every slice.
      let woke =
        handle >= 0
        ? ts_child_wait(handle, wake, Self.slice(left))
        : (ts_child_wait(wake, -1, min(Self.slice(left), 20)) > 0
          ? 2 : (Self.ended(pid) ? 1 : 0))
      if woke == 1 { break }
      if woke == 2 { ending = .cancelled }
      if woke < 0 { ending = .failedToStart("wait: \(SystemFiles.describe(-woke))") }
    }
    return Self.end(pid, ending: ending)
  }

  /// One wait's slice of the time `left`: at most a second, at least a millisecond.
  static func slice(_ left: Duration) -> Int32 {
    let (seconds, attoseconds) = left.components
    return Int32(max(1, min(seconds * 1_000 + attoseconds / 1_000_000_000_000_000, 1_000)))
  }

  /// Ends the child `pid`'s whole tree and collects it: `ending`, or how it ended by itself.
  static func end(_ pid: pid_t, ending: SandboxOutcome?) -> SandboxOutcome {
    // The tree goes, whatever its leader did: nothing it started outlives the run. Killing the
    // group alone left bubblewrap's inner process (in a session of its own) running when the
    // outer one died before the inner one had asked to die with it.
    _ = ts_child_kill_tree(pid)
    var status: Int32 = 0
    _ = ts_child_reap(pid, &status)
    if let ending { return ending }
    return outcome(ofStatus: status)
  }

  /// A wait status as an outcome.
  static func outcome(ofStatus status: Int32) -> SandboxOutcome {
    let code = ts_status_exit_code(status)
    return code >= 0 ? .exited(code) : .signalled(ts_status_signal(status))
  }

  /// Makes `job`'s output folder (at `output`, or the next free name, which `output` then
  /// holds) and starts bubblewrap: its pid, or why it did not start.
  private func spawn(
    _ job: SandboxJob, output: inout String, messages: Int32
  ) -> Result<pid_t, SandboxLaunchFailure> {
    func failed(_ reason: String) -> Result<pid_t, SandboxLaunchFailure> {
      .failure(SandboxLaunchFailure(reason: reason))
    }
    // A child run as another user reaches its folders through bubblewrap, which follows
    // their paths: the work folder lets it pass (0711), never list.
    guard SystemFiles.makeDirectories(workFolder, mode: runAs == nil ? 0o700 : 0o711) else {
      return failed("cannot make \(workFolder)")
    }
    // In a shared folder another user may have made it first, or left a link there.
    var folderStatus = stat()
    guard lstat(workFolder, &folderStatus) == 0, folderStatus.st_mode & S_IFMT == S_IFDIR,
      folderStatus.st_uid == getuid(), chmod(workFolder, runAs == nil ? 0o700 : 0o711) == 0
    else {
      return failed("\(workFolder) is not a folder of thumbd's own")
    }
    // A folder of this name left by an earlier process with the same number (one that was
    // killed) is passed over for the next free number, never reused.
    var made = mkdir(output, 0o700) == 0
    var tries = 1
    while !made && errno == EEXIST && tries < Self.folderTries {
      output = "\(workFolder)/run-\(getpid())-\(Self.runs.add(1, ordering: .relaxed).newValue)"
      made = mkdir(output, 0o700) == 0
      tries += 1
    }
    guard made else {
      return failed("cannot make \(output): \(SystemFiles.describe(errno))")
    }
    if let runAs, chown(output, uid_t(runAs), gid_t(runAs)) != 0 {
      return failed("cannot give \(output) to the sandbox's user")
    }
    // Folders and files reach bubblewrap as descriptors opened here: no path is resolved
    // again by a child that may run as another user.
    let folder = ts_open_folder(output)
    guard folder >= 0 else { return failed("cannot open \(output)") }
    defer { close(folder) }
    let filter = ts_sandbox_filter()
    guard filter >= 0 else { return failed("no seccomp filter: \(-filter)") }
    defer { close(filter) }
    // In the child: 3 the filter, 4 the output folder, then the input and the program when
    // there are (bubblewrapArguments numbers them the same way).
    var passed = [filter, folder]
    if let input = job.input { passed.append(input) }
    if let program = job.program { passed.append(program) }
    let arguments = bubblewrapArguments(job)
    let environment = [
      "PATH=/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8", "GIO_USE_VFS=local",
    ]
    var childLimits = ts_child_limits(
      cpu_seconds: UInt64(limits.cpuSeconds), address_space: UInt64(limits.addressSpace),
      file_size: UInt64(limits.fileSize), processes: 0,
      open_files: UInt64(limits.openFiles))
    let pid: pid_t = withCStrings([bwrap] + arguments) { argv in
      withCStrings(environment) { envp in
        passed.withUnsafeBufferPointer { fds in
          ts_spawn_limited(
            bwrap, argv, envp, &childLimits, fds.baseAddress, Int32(fds.count),
            job.standardInput ?? -1, job.standardOutput ?? -1, messages, runAs ?? -1)
        }
      }
    }
    guard pid > 0 else { return failed(SystemFiles.describe(-pid)) }
    return .success(pid)
  }

  private static func ended(_ pid: pid_t) -> Bool {
    var info = siginfo_t()
    return waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0
      && info._sifields._sigchld.si_pid == pid
  }

  /// bubblewrap's arguments for `job`: the filesystem, namespaces, filter and program.
  func bubblewrapArguments(_ job: SandboxJob) -> [String] {
    var arguments = [
      "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
      "--new-session", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr",
    ]
    // Merged-/usr folders are links into /usr; others are bound as they are.
    for folder in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
      var status = stat()
      guard lstat(folder, &status) == 0 else { continue }
      if status.st_mode & S_IFMT == S_IFLNK {
        if let target = Self.linkTarget(folder),
          target.hasPrefix("usr/") || target.hasPrefix("/usr/")
        {
          arguments += ["--symlink", target, folder]
        }
      } else if status.st_mode & S_IFMT == S_IFDIR {
        arguments += ["--ro-bind", folder, folder]
      }
    }
    // What the loader, fonts and the alternatives' links in /usr/bin need of /etc, and
    // fontconfig's system cache: without it every program that draws text (librsvg, poppler,
    // the font viewer) scans every installed font again, 0.5 s of a 0.07 s SVG thumbnail.
    for file in [
      "/etc/ld.so.cache", "/etc/fonts", "/etc/alternatives", "/etc/localtime",
      "/var/cache/fontconfig",
    ] {
      arguments += ["--ro-bind-try", file, file]
    }
    arguments += [
      "--proc", "/proc", "--dev", "/dev",
      "--size", String(limits.temporaryBytes), "--tmpfs", "/tmp",
      "--dir", Self.inputFolder, job.readOnly ? "--ro-bind-fd" : "--bind-fd", "4",
      Self.outputFolder,
    ]
    var next = 5
    if job.input != nil {
      arguments += ["--ro-bind-fd", String(next), job.inputPath]
      next += 1
    }
    if job.program != nil {
      arguments += ["--ro-bind-fd", String(next), SandboxJob.programPath]
    }
    for folder in job.readOnlyFolders where folder.hasPrefix("/") {
      arguments += ["--ro-bind-try", folder, folder]
    }
    // The root bubblewrap builds is a tmpfs: read-only, so only /tmp (sized) and the output
    // folder take writes.
    arguments += ["--remount-ro", "/"]
    if job.readOnly { arguments += ["--remount-ro", "/tmp"] }
    arguments += ["--chdir", "/tmp", "--seccomp", "3", "--"]
    // The process limit is set inside, once the sandbox has its own user namespace, where
    // the kernel counts only the sandbox's processes against it. Set on bubblewrap, it would
    // count every process of the user (a desktop session has hundreds), and every sandbox
    // of the same user would share it: one fork bomb would starve the others.
    arguments += [Self.prlimit, "--nproc=\(limits.processes)", "--"]
    return arguments + job.arguments
  }

  private static func linkTarget(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 256)
    let count = readlink(path, &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

/// What one sandboxed run is given.
public struct SandboxJob: Sendable {
  /// The program and its arguments, as the child sees them (paths inside the sandbox).
  public var arguments: [String]
  /// An open descriptor of the input, bound read-only at ``inputPath``; the caller keeps it
  /// open until the run ends and closes it.
  public var input: Int32?
  /// The input's name inside ``Sandbox/inputFolder``: keep the original extension, which
  /// some programs read the type from.
  public var inputName: String
  /// An open descriptor of a program from outside `/usr` (thumbd's own worker), bound
  /// read-only at ``programPath``; the caller keeps it open until the run ends.
  public var program: Int32?
  /// Folders of the host shown read-only at the same paths (the Swift runtime a worker built
  /// without `--static-swift-stdlib` loads); none by default.
  public var readOnlyFolders: [String] = []
  /// Where the child's stdout goes (a descriptor the caller reads after the run), instead of
  /// joining its stderr in ``SandboxRun/messages``.
  public var standardOutput: Int32?
  /// The child's stdin, instead of `/dev/null`: an input it reads by descriptor (with
  /// `pread`, so the caller's offset is untouched), with no path bound for it. Open it
  /// read-only.
  public var standardInput: Int32?

  /// Nothing in the sandbox takes writes: `/tmp` and the output folder are read-only too.
  /// For a child that serves many pieces of work (`FrameServers`), so that none leaves a
  /// file for the next.
  public var readOnly = false

  /// Where ``program`` is, inside the sandbox.
  public static let programPath = Sandbox.inputFolder + "/program"

  /// A job running `arguments` on `input`, seen inside as `inputName`.
  public init(arguments: [String], input: Int32? = nil, inputName: String = "input") {
    self.arguments = arguments
    self.input = input
    self.inputName = inputName
  }

  /// Where the input is, inside the sandbox.
  public var inputPath: String { Sandbox.inputFolder + "/" + inputName }

  /// An input name for a file named `name`: `input` and its extension when that is short
  /// and plain (letters and digits), so nothing of the name but the type reaches the child.
  public static func inputName(for name: String) -> String {
    guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "input" }
    let suffix = name[name.index(after: dot)...]
    guard (1...8).contains(suffix.utf8.count),
      suffix.utf8.allSatisfy({
        (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
      })
    else { return "input" }
    return "input." + suffix
  }
}

/// Limits on one sandboxed run.
public struct SandboxLimits: Sendable, Equatable {
  /// CPU seconds each process may use (RLIMIT_CPU).
  public var cpuSeconds = 30
  /// Address space of each process, bytes (RLIMIT_AS).
  public var addressSpace = 2 << 30
  /// Largest file a process may write, bytes (RLIMIT_FSIZE).
  public var fileSize = 64 << 20
  /// Processes the run may have at once (RLIMIT_NPROC, set inside the sandbox, where only
  /// its own processes count).
  public var processes = 64
  /// Descriptors each process may have open (RLIMIT_NOFILE).
  public var openFiles = 256
  /// The private `/tmp`'s size, bytes.
  public var temporaryBytes = 64 << 20
  /// Wall-clock time from start to the group's kill.
  public var deadline: Duration = .seconds(30)

  /// The defaults.
  public init() {}
}

/// How a sandboxed run ended.
public enum SandboxOutcome: Sendable, Equatable, CustomStringConvertible {
  /// The program exited with this code (bubblewrap passes the program's on).
  case exited(Int32)
  /// A signal ended it: a limit (SIGXCPU, SIGXFSZ, SIGSYS, SIGKILL) or its own.
  case signalled(Int32)
  /// The deadline passed; the group was killed.
  case timedOut
  /// The caller's task was cancelled; the group was killed.
  case cancelled
  /// No child ran, for this reason.
  case failedToStart(String)

  /// The outcome in words, for logs and errors.
  public var description: String {
    switch self {
    case .exited(let code): "exited with \(code)"
    case .signalled(let signal): "ended by signal \(signal)"
    case .timedOut: "timed out"
    case .cancelled: "cancelled"
    case .failedToStart(let reason): "not started: \(reason)"
    }
  }
}

/// A thread that lives as long as the process and runs what is handed to it, one at a time,
/// for a caller that waits: children forked there outlive whichever thread asked for them.
final class LaunchThread: Sendable {
  private let queue = Mutex<[@Sendable () -> Void]>([])
  private let wake = ConditionLock()

  init() {
    SystemThread.detach(name: "thumbd-launch") { [self] in
      while true {
        wake.lock()
        var work = queue.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        while work == nil {
          wake.wait()
          work = queue.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        }
        wake.unlock()
        work?()
      }
    }
  }

  /// Runs `body` on the thread and waits for its result.
  func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
    let done = ConditionLock()
    let result = Mutex<T?>(nil)
    wake.withLock {
      queue.withLock { queue in
        queue.append {
          let value = body()
          done.withLock {
            result.withLock { $0 = value }
            done.signal()
          }
        }
      }
      wake.signal()
    }
    done.lock()
    defer { done.unlock() }
    while true {
      if let value = result.withLock({ $0 }) { return value }
      done.wait()
    }
  }
}

/// Why a sandboxed child did not start.
public struct SandboxLaunchFailure: Error, Sendable {
  /// The reason, in words.
  public let reason: String
}

/// A sandboxed child started by ``Sandbox/launch(_:)``, which its one owner waits for
/// (``handle``) and ends (``end()``); the tree is killed by ``end()`` at the latest, or when
/// this is released.
public final class SandboxProcess: Sendable {
  /// bubblewrap's pid on the host.
  public let pid: pid_t
  /// A descriptor that becomes readable when the child ends (pidfd), or -1 on a kernel
  /// without them.
  public let handle: Int32
  /// Its output folder on the host, removed by ``end()``.
  public let outputFolder: String
  /// Where bubblewrap's and the program's own messages go (a memory file), or -1.
  private let messages: Int32
  private let ended = Atomic<Bool>(false)

  init(pid: pid_t, outputFolder: String, messages: Int32) {
    self.pid = pid
    self.outputFolder = outputFolder
    self.messages = messages
    handle = ts_child_handle(pid)
  }

  /// Kills the whole tree (if it still runs), collects it and removes its folder: how it
  /// ended, when this call ended it or found it ended; nil once ended before.
  @discardableResult
  public func end() -> SandboxOutcome? {
    guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return nil }
    let outcome = Sandbox.end(pid, ending: nil)
    if handle >= 0 { close(handle) }
    _ = ts_remove_tree(outputFolder, 16, 100_000)
    return outcome
  }

  /// The first bytes of its own messages (bubblewrap's, the server's), as text.
  public var messageText: String { Sandbox.head(of: messages) }

  deinit {
    end()
    if messages >= 0 { close(messages) }
  }
}

/// What stops a run from outside, from any thread.
public final class SandboxCancellation: Sendable {
  /// An eventfd the run's wait watches, or -1 when none could be made (then only the
  /// deadline ends a run).
  let descriptor: Int32

  /// A cancellation not yet raised.
  public init() { descriptor = max(-1, ts_wakeup_create()) }

  /// Ends the run at once: its group is killed, its outcome is ``SandboxOutcome/cancelled``.
  public func cancel() { if descriptor >= 0 { _ = ts_wakeup_signal(descriptor) } }

  deinit { if descriptor >= 0 { close(descriptor) } }
}

/// One run's result: how it ended and the output folder it had, on the host.
public struct SandboxRun: Sendable {
  /// How the run ended.
  public let outcome: SandboxOutcome
  /// The run's output folder on the host: untrusted; read with bounds, then ``discard()``.
  public let outputFolder: String
  /// Wall-clock time from start to end.
  public let elapsed: Duration
  /// The first ``messageLimit`` bytes the child (bubblewrap and the program) wrote to its
  /// stdout and stderr: untrusted text, for logs.
  public let messages: String

  /// How much of the child's output ``messages`` keeps.
  public static let messageLimit = 2_048

  /// Removes the output folder and what the child left there (bounded: a child may have
  /// filled it with a deep tree).
  public func discard() {
    _ = ts_remove_tree(outputFolder, 16, 100_000)
  }
}

/// `strings` as a NULL-terminated C array for the call of `body`.
func withCStrings<T>(
  _ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> T
) -> T {
  var pointers = strings.map { strdup($0) }
  pointers.append(nil)
  defer { for pointer in pointers { free(pointer) } }
  return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
