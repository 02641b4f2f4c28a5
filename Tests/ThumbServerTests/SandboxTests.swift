import CSystem
import Foundation
import ImagePipeline
import Sandbox
import Synchronization
import Testing
import ThumbSystem

@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The sandbox holds (issue 53): a hostile child, a Python program run the way an installed
/// thumbnailer is, tries each escape in turn. Every check is made from outside, on what the
/// host sees (the secret's bytes, files, a listener, a victim process, the process table);
/// the child's own report only shows that it tried.
@Suite("Sandbox", .serialized)
struct SandboxTests {
  /// The interpreter the hostile programs run on: inside `/usr`, so the sandbox shows it.
  static let python = "/usr/bin/python3"

  static let limits: SandboxLimits = {
    var limits = SandboxLimits()
    limits.cpuSeconds = 5
    limits.addressSpace = 512 << 20
    limits.fileSize = 8 << 20
    limits.processes = 16
    limits.temporaryBytes = 8 << 20
    limits.deadline = .seconds(3)
    return limits
  }()

  /// A folder, a sandbox working under it, and a way to run a Python program in it.
  final class Bench: Sendable {
    let folder: String
    let sandbox: Sandbox

    init(limits: SandboxLimits = SandboxTests.limits) throws {
      folder = TestDaemon.makeDirectory()
      chmod(folder, 0o711)
      sandbox = Sandbox(
        bwrap: Sandbox.findBubblewrap() ?? "/usr/bin/bwrap", workFolder: folder + "/work",
        limits: limits)
    }

    /// Runs `program` (its text the sandbox's input, `input.py`) with `arguments`; returns the
    /// run and the report it wrote to `report.txt` in its output folder (not yet discarded).
    func run(_ program: String, _ arguments: [String] = []) async throws -> (SandboxRun, String) {
      let path = folder + "/program-\(UInt64.random(in: 0...UInt64.max)).py"
      try program.write(toFile: path, atomically: false, encoding: .utf8)
      chmod(path, 0o644)
      let input = open(path, O_RDONLY | O_CLOEXEC)
      #expect(input >= 0)
      defer { close(input) }
      let job = SandboxJob(
        arguments: [SandboxTests.python, "/thumbd/input.py"] + arguments, input: input,
        inputName: "input.py")
      let run = await sandbox.run(job)
      let report =
        (try? String(contentsOfFile: run.outputFolder + "/report.txt", encoding: .utf8)) ?? ""
      return (run, "\(report)")
    }

    deinit { try? FileManager.default.removeItem(atPath: folder) }
  }

  /// A Python program's opening: `note(text)` appends a line to the report.
  static let prelude = """
    import os, sys, socket, time, ctypes, signal
    def note(text):
        with open('/thumbd/out/report.txt', 'a') as f:
            f.write(text + '\\n')

    """

  static func available() async -> Bool {
    guard let bwrap = Sandbox.findBubblewrap(), access(python, X_OK) == 0 else { return false }
    let sandbox = Sandbox(bwrap: bwrap, workFolder: TestDaemon.makeDirectory())
    return await SystemThread.run(name: "test-probe") { sandbox.probe() } == nil
  }

  @Test("a well-behaved child runs, writes its output, and its folder is removed after")
  func runs() async throws {
    #expect(await Self.available(), "bubblewrap must work here: scripts/bootstrap installs it")
    let bench = try Bench()
    let (run, report) = try await bench.run(
      Self.prelude + """
        note('uid %d' % os.getuid())
        with open('/thumbd/out/thumbnail.png', 'wb') as f:
            f.write(b'made inside')
        note('wrote')
        """)
    #expect(run.outcome == .exited(0), "\(run.outcome) \(report) \(run.messages)")
    #expect(report.contains("wrote"))
    #expect(
      FileManager.default.contents(atPath: run.outputFolder + "/thumbnail.png")
        == Data("made inside".utf8))
    run.discard()
    #expect(!FileManager.default.fileExists(atPath: run.outputFolder))
  }

  @Test(
    "the system's font cache is seen read-only: a program that draws text does not scan every font again"
  )
  func fontCacheSeen() async throws {
    let host = (try? FileManager.default.contentsOfDirectory(atPath: "/var/cache/fontconfig"))
    try #require(host?.isEmpty == false, "no fontconfig cache on this machine")
    let bench = try Bench()
    let (run, report) = try await bench.run(
      Self.prelude + """
        note('caches %d' % len(os.listdir('/var/cache/fontconfig')))
        try:
            open('/var/cache/fontconfig/planted', 'w').write('x')
            note('wrote the cache')
        except OSError:
            note('cache read-only')
        """)
    defer { run.discard() }
    #expect(report.contains("caches \(host!.count)"), "\(run.outcome) \(report) \(run.messages)")
    #expect(report.contains("cache read-only"), "\(report)")
    #expect(!FileManager.default.fileExists(atPath: "/var/cache/fontconfig/planted"))
  }

  @Test(
    "a secret outside the input is not read: the host's files, other users', the daemon's environment"
  )
  func secretStaysHidden() async throws {
    let bench = try Bench()
    let secret = "secret-\(UInt64.random(in: 0...UInt64.max))"
    let secretPath = bench.folder + "/secret.txt"
    try secret.write(toFile: secretPath, atomically: false, encoding: .utf8)
    chmod(secretPath, 0o644)
    setenv("THUMBD_TEST_SECRET", secret, 1)
    defer { unsetenv("THUMBD_TEST_SECRET") }
    let (run, report) = try await bench.run(
      Self.prelude + """
        found = []
        paths = [sys.argv[1], '/proc/%s/environ' % sys.argv[2], '/proc/1/environ',
                 '/proc/self/environ', '/etc/shadow', '/etc/passwd', '/root/.bash_history']
        for path in paths:
            try:
                with open(path, 'rb') as f:
                    data = f.read()
                found.append(data)
                note('read %s' % path)
            except Exception as e:
                note('refused %s %s' % (path, type(e).__name__))
        with open('/thumbd/out/loot', 'wb') as f:
            f.write(b'\\n'.join(found))
        note('tried')
        """, [secretPath, String(getpid())])
    defer { run.discard() }
    #expect(report.contains("tried"), "\(run.outcome) \(report)")
    let loot = FileManager.default.contents(atPath: run.outputFolder + "/loot") ?? Data()
    #expect(!loot.isEmpty || report.contains("refused"))
    #expect(loot.range(of: Data(secret.utf8)) == nil, "the child read the secret: \(report)")
    #expect(report.contains("refused \(secretPath)"), "\(report)")
  }

  @Test("a daemon holding hundreds of descriptors still starts children under a lower limit")
  func manyDescriptors() async throws {
    let bench = try Bench()
    // Every number from 3 to past the child's descriptor limit taken, as a busy daemon's
    // connections take them: the child's own copies must still find room.
    var held: [Int32] = []
    while held.count < 2 * Self.limits.openFiles {
      let file = open("/dev/null", O_RDONLY | O_CLOEXEC)
      guard file >= 0 else { break }
      held.append(file)
    }
    defer { for file in held { close(file) } }
    let (run, report) = try await bench.run(Self.prelude + "note('ran')\n")
    defer { run.discard() }
    #expect(run.outcome == .exited(0), "\(run.outcome) \(run.messages)")
    #expect(report.contains("ran"))
  }

  @Test(
    "two sandboxes on one work folder (video frames, installed thumbnailers) never share a run folder, nor take one an earlier process left"
  )
  func distinctRunFolders() async throws {
    let bench = try Bench()
    let other = Sandbox(
      bwrap: bench.sandbox.bwrap, workFolder: bench.sandbox.workFolder, limits: Self.limits)
    let program = Self.prelude + "note('ran')"
    let (first, _) = try await bench.run(program)
    // A folder as a killed process with this number would have left it, named as the next
    // run would be.
    let number = Int(first.outputFolder.split(separator: "-").last ?? "") ?? 0
    let stale = bench.sandbox.workFolder + "/run-\(getpid())-\(number + 1)"
    #expect(mkdir(stale, 0o700) == 0)
    let path = bench.folder + "/program.py"
    try program.write(toFile: path, atomically: false, encoding: .utf8)
    chmod(path, 0o644)
    let input = open(path, O_RDONLY | O_CLOEXEC)
    defer { close(input) }
    let second = await other.run(
      SandboxJob(
        arguments: [Self.python, "/thumbd/input.py"], input: input, inputName: "input.py"))
    #expect(first.outcome == .exited(0) && second.outcome == .exited(0), "\(second.outcome)")
    #expect(first.outputFolder != second.outputFolder && second.outputFolder != stale)
    #expect(FileManager.default.fileExists(atPath: second.outputFolder + "/report.txt"))
    #expect(FileManager.default.fileExists(atPath: first.outputFolder + "/report.txt"))
  }

  @Test("writing outside the output folder leaves nothing on the host")
  func writesStayInside() async throws {
    let bench = try Bench()
    let targets = [bench.folder + "/planted", "/tmp/thumbd-sandbox-escape-\(getpid())"]
    let (run, report) = try await bench.run(
      Self.prelude + """
        for path in sys.argv[1:] + ['/usr/planted', '/etc/planted', '/planted', '/thumbd/planted',
                                    '/thumbd/input.py', '/proc/sys/kernel/hostname']:
            try:
                with open(path, 'w') as f:
                    f.write('escaped')
                note('wrote %s' % path)
            except Exception as e:
                note('refused %s %s' % (path, type(e).__name__))
        note('tried')
        """, targets)
    defer { run.discard() }
    #expect(report.contains("tried"), "\(run.outcome) \(report)")
    for target in targets + ["/usr/planted", "/etc/planted"] {
      #expect(!FileManager.default.fileExists(atPath: target), "\(target) appeared: \(report)")
      unlink(target)
    }
    // Inside, only the private /tmp (sized, gone with the run) and the output folder take
    // writes: the sandbox's own root does not.
    let wrote = report.split(separator: "\n").filter { $0.hasPrefix("wrote") }
    #expect(wrote.allSatisfy { $0.hasPrefix("wrote /tmp/") }, "\(report)")
  }

  @Test("no connection reaches a loopback listener or a Unix socket; other families are refused")
  func noNetwork() async throws {
    let bench = try Bench()
    let listener = ts_listen_tcp("127.0.0.1", 0, 16)
    #expect(listener >= 0)
    defer { close(listener) }
    let port = ts_local_port(listener)
    let unixPath = bench.folder + "/listener.sock"
    let unixListener = ts_listen_unix(unixPath, 0o777, 16)
    #expect(unixListener >= 0)
    defer { close(unixListener) }
    let (run, report) = try await bench.run(
      Self.prelude + """
        port = int(sys.argv[1])
        for family, address in [(socket.AF_INET, ('127.0.0.1', port)), (socket.AF_INET6, ('::1', port)),
                                (socket.AF_UNIX, sys.argv[2])]:
            try:
                s = socket.socket(family, socket.SOCK_STREAM)
                s.settimeout(1)
                s.connect(address)
                note('connected %s' % (address,))
            except Exception as e:
                note('refused %s %s' % (address, e))
        for family in [socket.AF_NETLINK, socket.AF_PACKET]:
            try:
                socket.socket(family, socket.SOCK_RAW)
                note('opened family %d' % family)
            except Exception as e:
                note('refused family %d %s' % (family, e))
        note('tried')
        """, [String(port), unixPath])
    defer { run.discard() }
    #expect(report.contains("tried"), "\(run.outcome) \(report)")
    #expect(!report.contains("connected") && !report.contains("opened family"), "\(report)")
    // Nothing is waiting to be accepted on either listener.
    for fd in [listener, unixListener] {
      var flags = fcntl(fd, F_GETFL)
      flags |= O_NONBLOCK
      _ = fcntl(fd, F_SETFL, flags)
      #expect(accept(fd, nil, nil) < 0, "a connection reached the host: \(report)")
    }
    // The filter, not only the empty namespace, refuses the other families.
    #expect(report.contains("Address family not supported"), "\(report)")
  }

  @Test("the daemon's processes are neither seen nor signalled; namespaces and tracing are refused")
  func otherProcessesUnreachable() async throws {
    let bench = try Bench()
    let victim = try Process.run(URL(fileURLWithPath: "/bin/sleep"), arguments: ["30"])
    defer { victim.terminate() }
    let (run, report) = try await bench.run(
      Self.prelude + """
        victim = int(sys.argv[1])
        pids = [p for p in os.listdir('/proc') if p.isdigit()]
        note('sees %d processes' % len(pids))
        for pid in [victim, int(sys.argv[2]), 1]:
            try:
                os.kill(pid, signal.SIGKILL)
                note('signalled %d' % pid)
            except Exception as e:
                note('refused %d %s' % (pid, e))
        libc = ctypes.CDLL(None, use_errno=True)
        for name, call in [('unshare', lambda: libc.unshare(0x10000000)),
                           ('ptrace', lambda: libc.ptrace(16, victim, 0, 0)),
                           ('keyctl', lambda: libc.syscall(250, 0, 0, 0, 0))]:
            result = call()
            note('%s %s errno %d' % (name, 'allowed' if result == 0 else 'refused', ctypes.get_errno()))
        note('tried')
        """, [String(victim.processIdentifier), String(getpid())])
    defer { run.discard() }
    #expect(report.contains("tried"), "\(run.outcome) \(report)")
    #expect(victim.isRunning, "the victim was killed: \(report)")
    #expect(!report.contains("signalled \(victim.processIdentifier)"), "\(report)")
    #expect(!report.contains("signalled \(getpid())"), "\(report)")
    #expect(report.contains("unshare refused errno 1"), "\(report)")
    #expect(report.contains("ptrace refused errno 1"), "\(report)")
    // Its own namespace: only the sandbox's few processes are visible.
    let seen =
      report.split(separator: "\n").first { $0.hasPrefix("sees") }
      .flatMap { Int($0.split(separator: " ")[1]) } ?? .max
    #expect(seen <= 4, "\(report)")
  }

  @Test("a fork bomb is held to the process limit, and no process of it outlives the run")
  func forkBomb() async throws {
    let bench = try Bench()
    let marker = "bomb-\(UInt64.random(in: 0...UInt64.max))"
    let (run, report) = try await bench.run(
      Self.prelude + """
        made = 0
        refused = 0
        for i in range(100000):
            try:
                if os.fork() == 0:
                    time.sleep(3600)
                    os._exit(0)
                made += 1
            except OSError:
                refused += 1
                if refused > 50:
                    break
        note('made %d refused %d' % (made, refused))
        time.sleep(3600)
        """, [marker])
    defer { run.discard() }
    #expect(report.contains("refused"), "\(run.outcome) \(report)")
    let made = report.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? .max
    #expect(made < Self.limits.processes, "\(report)")
    #expect(run.outcome == .timedOut)
    await eventually("no process of the bomb left") {
      DelegatedFixtures.processes(holding: marker) == 0
    }
  }

  // The bomb's deadline is long and it is cancelled at the end: with the usual 3 s, a busy
  // machine could kill it before it had filled its limit, and the wait below never ended.
  @Test("a fork bomb at its limit in one sandbox leaves room for another sandbox's run")
  func bombStarvesNoOne() async throws {
    var limits = Self.limits
    limits.deadline = .seconds(120)
    let bench = try Bench(limits: limits)
    let marker = "neighbour-\(UInt64.random(in: 0...UInt64.max))"
    let bomb = Task {
      try await bench.run(
        Self.prelude + """
          for i in range(100000):
              try:
                  if os.fork() == 0:
                      time.sleep(3600)
                      os._exit(0)
              except OSError:
                  break
          note('full')
          time.sleep(3600)
          """, [marker])
    }
    await eventually("the bomb is at its limit") {
      DelegatedFixtures.processes(holding: marker) >= Self.limits.processes - 2
    }
    let (run, report) = try await bench.run(Self.prelude + "note('ran')\n")
    defer { run.discard() }
    #expect(run.outcome == .exited(0), "\(run.outcome) \(run.messages)")
    #expect(report.contains("ran"))
    bomb.cancel()
    let (bombRun, _) = try await bomb.value
    bombRun.discard()
    #expect(bombRun.outcome == .cancelled, "the bomb ended before it was cancelled")
    await eventually("no process of the bomb left") {
      DelegatedFixtures.processes(holding: marker) == 0
    }
  }

  @Test("allocating 8 GiB fails inside the child; the run ends at once")
  func hugeAllocation() async throws {
    let bench = try Bench()
    let (run, report) = try await bench.run(
      Self.prelude + """
        try:
            block = bytearray(8 << 30)
            note('allocated')
        except MemoryError:
            note('refused')
            sys.exit(3)
        """)
    defer { run.discard() }
    #expect(report.contains("refused"), "\(run.outcome) \(report)")
    #expect(run.outcome == .exited(3))
  }

  @Test("a 2 GiB output stops at the file size limit")
  func hugeOutput() async throws {
    let bench = try Bench()
    let (run, report) = try await bench.run(
      Self.prelude + """
        chunk = b'\\0' * (1 << 20)
        written = 0
        try:
            with open('/thumbd/out/thumbnail.png', 'wb') as f:
                for i in range(2048):
                    f.write(chunk)
                    written += 1
        except OSError as e:
            note('stopped after %d MiB: %s' % (written, e))
            sys.exit(4)
        note('wrote 2 GiB')
        """)
    defer { run.discard() }
    #expect(report.contains("stopped"), "\(run.outcome) \(report)")
    let size =
      (try? FileManager.default.attributesOfItem(atPath: run.outputFolder + "/thumbnail.png")[.size]
        as? Int) ?? 0
    #expect(size <= Self.limits.fileSize)
  }

  @Test("a child that sleeps forever is killed at the deadline, group and all")
  func deadline() async throws {
    let bench = try Bench()
    let marker = "sleeper-\(UInt64.random(in: 0...UInt64.max))"
    let (run, report) = try await bench.run(
      Self.prelude + """
        if os.fork() == 0:
            os.setsid()
        note('sleeping')
        time.sleep(3600)
        """, [marker])
    defer { run.discard() }
    #expect(run.outcome == .timedOut, "\(report)")
    #expect(run.elapsed >= Self.limits.deadline && run.elapsed < Self.limits.deadline + .seconds(2))
    await eventually("no sleeper left") { DelegatedFixtures.processes(holding: marker) == 0 }
  }

  @Test("cancelling the caller kills the child's group at once")
  func cancellation() async throws {
    var limits = Self.limits
    limits.deadline = .seconds(60)
    let bench = try Bench(limits: limits)
    let marker = "cancelled-\(UInt64.random(in: 0...UInt64.max))"
    let running = Task {
      try await bench.run(Self.prelude + "note('started')\ntime.sleep(3600)\n", [marker])
    }
    await eventually("the child started") { DelegatedFixtures.processes(holding: marker) > 0 }
    let started = ContinuousClock.now
    running.cancel()
    let (run, _) = try await running.value
    defer { run.discard() }
    #expect(run.outcome == .cancelled)
    #expect(started.duration(to: .now) < .seconds(1))
    await eventually("no child left") { DelegatedFixtures.processes(holding: marker) == 0 }
  }

  // The time limit turns a run whose child outlived its kill (the run's thread then waits
  // for it) into a failure, not a hang.
  @Test(
    "a run cancelled while the sandbox starts leaves no process, however early it lands",
    .timeLimit(.minutes(1)))
  func cancelledWhileStarting() async throws {
    var limits = Self.limits
    limits.deadline = .seconds(60)
    let bench = try Bench(limits: limits)
    var markers: [String] = []
    for round in 0..<24 {
      let marker = "starting-\(round)-\(UInt64.random(in: 0...UInt64.max))"
      markers.append(marker)
      let running = Task { try await bench.run(Self.prelude + "time.sleep(3600)\n", [marker]) }
      // Lands anywhere from before bubblewrap starts to after the child runs.
      for _ in 0..<Int.random(in: 0...400) { await Task.yield() }
      running.cancel()
      let (run, _) = try await running.value
      run.discard()
    }
    await eventually("no process of any run left") {
      markers.allSatisfy { DelegatedFixtures.processes(holding: $0) == 0 }
    }
  }

  @Test("the input's name inside keeps only a plain extension")
  func inputNames() {
    #expect(SandboxJob.inputName(for: "clip.MP4") == "input.MP4")
    #expect(SandboxJob.inputName(for: "a.tar.gz") == "input.gz")
    #expect(SandboxJob.inputName(for: ".hidden") == "input")
    #expect(SandboxJob.inputName(for: "x.../../etc") == "input")
    #expect(SandboxJob.inputName(for: "noextension") == "input")
    #expect(SandboxJob.inputName(for: "x.abcdefghi") == "input")
  }
}

/// An installed thumbnailer, for real, in the sandbox (issue 53).
@Suite("Installed thumbnailers in the sandbox", .onLane(.clients))
struct DelegatedThumbnailerTests {
  @Test(
    "Debian's gdk-pixbuf thumbnailer makes a PPM's thumbnail in the sandbox; thumbd's decoder reads it back"
  )
  func gdkPixbufOnPPM() async throws {
    let installed = InstalledThumbnailers.load(folders: ["/usr/share/thumbnailers"])
    let usable = try #require(
      installed.byType["image/x-portable-pixmap"],
      "libgdk-pixbuf2.0-bin's entry must be installed (scripts/bootstrap): \(installed.skipped)")
    let bench = try SandboxTests.Bench()
    let path = bench.folder + "/scan of a page.ppm"
    try Data(DelegatedFixtures.ppm(width: 400, height: 200)).write(
      to: URL(fileURLWithPath: path))
    chmod(path, 0o644)
    let input = open(path, O_RDONLY | O_CLOEXEC)
    defer { close(input) }
    let output = usable.run(
      input: input, name: "scan of a page.ppm", size: 128, in: bench.sandbox, outputLimit: 1 << 20)
    let bytes = try #require(output.bytes, "\(output.problem ?? "") \(output.run.messages)")
    let bitmap = try Thumbnailer().decodeFullResolution(.bytes(bytes))
    #expect(bitmap.width == 128 && bitmap.height == 64)
    // The gradient: red grows to the right, green downwards.
    func at(_ x: Int, _ y: Int) -> [Int] {
      let offset = (y * bitmap.width + x) * bitmap.channels
      return bitmap.pixels[offset..<offset + 3].map { Int($0) }
    }
    #expect(at(120, 32)[0] > at(8, 32)[0] + 150 && at(64, 56)[1] > at(64, 8)[1] + 120)
    #expect(!FileManager.default.fileExists(atPath: output.run.outputFolder))
  }
}
