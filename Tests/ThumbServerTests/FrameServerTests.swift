import CSystem
import Foundation
import ImagePipeline
import Synchronization
import Testing
import ThumbSystem

@testable import Sandbox
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The video worker's servers (`FrameServers`, CSystem's serve.c): one start for many videos,
/// and jobs that attack their server, the jobs after them and the sandbox, and fail.
@Suite("Frame servers", .serialized, .onLane(.clients))
struct FrameServerTests {
  /// A marker for one test's servers, found in their command lines.
  static func marker() -> String { "frames-\(UInt32.random(in: 1_000_000..<9_999_999))" }

  /// Servers of the hostile test program (beside the tests), named `label`.
  /// Their idle time is long unless given: a test of reuse must not depend on how soon a
  /// loaded machine runs its next step.
  static func hostile(
    label: String, deadline: Duration = .seconds(20), idleTime: Duration = .seconds(60)
  ) throws -> FrameServers {
    let frames = try VideoFramesTests.frames(limits: VideoFrames.limits(deadline: deadline))
    let program = SystemFiles.parent(of: frames.worker) + "/thumbd-hostile-server"
    var job = SandboxJob(arguments: [SandboxJob.programPath, "--serve", label])
    job.readOnlyFolders = frames.runtimeFolders
    return FrameServers(sandbox: frames.sandbox, worker: program, job: job, idleTime: idleTime)
  }

  /// Runs the job named by `what` (the input's extension) on `servers`: how it ended and what
  /// it wrote.
  static func run(_ servers: FrameServers, _ what: String, deadline: Duration = .seconds(20))
    -> (outcome: SandboxOutcome, output: String)
  {
    let input = open("/dev/null", O_RDONLY | O_CLOEXEC)
    let output = ts_memory_file()
    let messages = ts_memory_file()
    defer { for file in [input, output, messages] { close(file) } }
    let request = VideoFrames.request(name: "x." + what, box: (64, 64), maxPixels: 1 << 20)
    let outcome = servers.run(
      request, descriptors: [input, output, messages], deadline: deadline, cancellation: nil)
    var bytes = [UInt8](repeating: 0, count: 4096)
    let count = pread(output, &bytes, bytes.count, 0)
    return (outcome, String(decoding: bytes[..<max(0, count)], as: UTF8.self))
  }

  @Test("one server makes a run of videos' frames")
  func oneStartForMany() async throws {
    let label = Self.marker()
    let real = try VideoFramesTests.frames()
    let frames = VideoFrames(
      sandbox: real.sandbox, worker: real.worker, label: label, idleTime: .seconds(60))
    for relative in VideoFramesTests.timed {
      let file = open(Corpus.path(relative), O_RDONLY | O_CLOEXEC)
      try #require(file >= 0)
      defer { close(file) }
      let frame = try frames.frame(
        ofFile: file, source: .video(.mp4), name: relative, width: 64, height: 64,
        limits: DecodingLimits(),
        cancellation: nil)
      #expect(!frame.image.isEmpty, "\(relative)")
    }
    #expect(frames.serversStarted == 1)
    #expect(frames.runCounts["made"] == VideoFramesTests.timed.count)
  }

  @Test("a server idle for its idle time ends; a cancelled job ends the idle ones at once")
  func idleServersEnd() async throws {
    let label = Self.marker()
    let quick = try Self.hostile(label: label, idleTime: .seconds(2))
    #expect(Self.run(quick, "benign").outcome == .exited(0))
    // Kept as soon as it answered (a count, not a process found in time: the idle time may
    // pass on a loaded machine before a process listing ends).
    #expect(quick.idleCount == 1, "the server waits for more")
    await eventually("the idle server ended") {
      DelegatedFixtures.processes(holding: label) == 0
    }
    // Idle for an hour (past what `eventually` waits), unless work is withdrawn.
    let other = Self.marker()
    let slow = try Self.hostile(label: other, idleTime: .seconds(3600))
    // One server busy with a job that never ends, so the next job starts a second server,
    // which is idle once that job is done. (Two jobs started together may not overlap on a
    // loaded machine: this order makes the second server certain.)
    let stop = SandboxCancellation()
    async let stuck = SystemThread.run(name: "job-1") {
      let input = open("/dev/null", O_RDONLY | O_CLOEXEC)
      let output = ts_memory_file()
      let messages = ts_memory_file()
      defer { for file in [input, output, messages] { close(file) } }
      return slow.run(
        VideoFrames.request(name: "x.sleep", box: (64, 64), maxPixels: 1 << 20),
        descriptors: [input, output, messages], deadline: .seconds(60), cancellation: stop)
    }
    await eventually("the first server started") { slow.started == 1 }
    let second = await SystemThread.run(name: "job-2") { Self.run(slow, "benign").outcome }
    #expect(second == .exited(0))
    #expect(slow.started == 2 && slow.idleCount == 1)
    stop.cancel()
    #expect(await stuck == .cancelled)
    await eventually("none left") { DelegatedFixtures.processes(holding: other) == 0 }
  }

  @Test("a job's attacks on its server, its descriptors and the sandbox's files all fail")
  func attacksOnTheServer() throws {
    let servers = try Self.hostile(label: Self.marker())
    let (outcome, output) = Self.run(servers, "attacks")
    #expect(outcome == .exited(0), "\(output)")
    let lines = output.split(separator: "\n")
    #expect(lines.count == 8, "\(output)")
    #expect(lines.allSatisfy { $0.hasPrefix("held ") }, "\(output)")
    // The same server still answers honestly: the forged reply on a socket it does not hold
    // went nowhere.
    let next = Self.run(servers, "benign")
    #expect(next.outcome == .exited(0) && next.output == "ok\n", "\(next)")
    #expect(servers.started == 1)
  }

  @Test("a process a job leaves behind is gone before the next job starts")
  func stragglerKilled() throws {
    let servers = try Self.hostile(label: Self.marker())
    let first = Self.run(servers, "straggle")
    #expect(first.outcome == .exited(0) && first.output == "ok\n", "\(first)")
    // The straggler kills every later job it finds for 10 s: only the server's clean-up
    // stands between it and these.
    for _ in 0..<3 {
      let next = Self.run(servers, "benign")
      #expect(next.outcome == .exited(0) && next.output == "ok\n", "\(next)")
    }
    #expect(servers.started == 1)
  }

  @Test("a server started for a thread that has ended since still serves the next job")
  func outlivesItsThread() throws {
    let servers = try Self.hostile(label: Self.marker())
    let first = Mutex<SandboxOutcome?>(nil)
    // A child dies with the thread that forked it: the server must not come from this one.
    let thread = try #require(
      SystemThread.start(name: "short-lived") {
        let run = Self.run(servers, "benign")
        first.withLock { $0 = run.outcome }
      })
    thread.join()
    #expect(first.withLock { $0 } == .exited(0))
    let next = Self.run(servers, "benign")
    #expect(next.outcome == .exited(0) && next.output == "ok\n", "\(next)")
    #expect(servers.started == 1)
  }

  @Test("jobs at once each get a server of their own, kept for the jobs after them")
  func oneServerPerJobAtOnce() async throws {
    let servers = try Self.hostile(label: Self.marker())
    // Each job takes 50 ms: the two overlap, so neither can wait for the other's server.
    async let first = SystemThread.run(name: "job-1") { Self.run(servers, "benign").outcome }
    async let second = SystemThread.run(name: "job-2") { Self.run(servers, "benign").outcome }
    #expect(await [first, second] == [.exited(0), .exited(0)])
    #expect(servers.started == 2)
    for _ in 0..<2 {
      #expect(Self.run(servers, "benign").outcome == .exited(0))
    }
    #expect(servers.started == 2)
  }

  @Test("a job that kills its server fails alone; the next job gets a new server")
  func serverKilled() throws {
    let servers = try Self.hostile(label: Self.marker())
    let killed = Self.run(servers, "killsrv")
    #expect(killed.outcome == FrameServers.killedWithServer, "\(killed)")
    let next = Self.run(servers, "benign")
    #expect(next.outcome == .exited(0) && next.output == "ok\n", "\(next)")
    #expect(servers.started == 2)
  }

  @Test("a job past its deadline ends its server's whole sandbox, and no process of it is left")
  func deadline() async throws {
    let label = Self.marker()
    let servers = try Self.hostile(label: label)
    _ = Self.run(servers, "benign")
    let started = ContinuousClock.now
    let stuck = Self.run(servers, "sleep", deadline: .milliseconds(300))
    #expect(stuck.outcome == .timedOut)
    #expect(started.duration(to: .now) < .seconds(2))
    // Nothing of the sandbox is left, idle servers included (after their idle time).
    await eventually("no process of it left") { DelegatedFixtures.processes(holding: label) == 0 }
    let next = Self.run(servers, "benign")
    #expect(next.outcome == .exited(0) && next.output == "ok\n", "\(next)")
    #expect(servers.started == 2)
  }
}
