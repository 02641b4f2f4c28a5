import CSystem
import Synchronization
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// The video worker started once for many videos: `thumbd-frame --serve` in a sandbox of its
/// own, which binds FFmpeg's libraries once and forks a process per video (serve.c). A short
/// video no longer pays the worker's start, about 54 ms of CPU mapping FFmpeg's libraries.
///
/// Rules kept here:
/// - a server has one job at a time; a job takes an idle server or starts one, so there are
///   never more servers than videos made at once;
/// - a job's deadline or cancellation ends the server's whole sandbox, the job's process with
///   it; so does a server that ends, or answers anything but one reply of the exact size;
/// - a server idle for ``idleTime``, or one that has served ``jobLimit`` jobs, is ended, and a
///   cancelled job ends the idle ones too: no sandbox outlives the work it was started for by
///   more than that;
/// - the sandbox is read-only (``SandboxJob/readOnly``), and the server kills every process a
///   job left before it answers: nothing of one video's job meets the next;
/// - a reply says only how the job's process ended; what it made is read from the job's own
///   output file with thumbd's bounds (`VideoFrames.read`).
final class FrameServers: Sendable {
  /// Jobs one server runs before it is ended and a fresh one started.
  static let jobLimit = 256
  /// Idle servers kept at most.
  static let idleLimit = 8

  private let sandbox: Sandbox
  private let job: SandboxJob
  private let state = Mutex(State())

  private struct State {
    var idle: [Idle] = []
    var keeperRunning = false
    var started = 0
  }

  private struct Idle {
    let server: FrameServer
    let since: ContinuousClock.Instant
  }

  /// How long a server waits idle for its next job before it is ended.
  let idleTime: Duration

  /// Servers running `job` (the worker, bound from `worker` on the host, with `--serve`) in
  /// `sandbox`, each ended after `idleTime` idle.
  init(
    sandbox: Sandbox, worker: String, job: SandboxJob, idleTime: Duration
  ) {
    self.sandbox = sandbox
    self.worker = worker
    self.idleTime = idleTime
    var job = job
    job.readOnly = true
    self.job = job
  }

  private let worker: String

  /// Servers started so far.
  var started: Int { state.withLock { $0.started } }

  /// Servers waiting for a job now.
  var idleCount: Int { state.withLock { $0.idle.count } }

  /// Runs one job, `request` with its three descriptors (the video, the frame's output, the
  /// job's messages), to its end, `deadline` or `cancellation`, blocking the calling thread.
  func run(
    _ request: tf_request, descriptors: [Int32], deadline: Duration,
    cancellation: SandboxCancellation?
  ) -> SandboxOutcome {
    CooperativePool.willBlock("FrameServers.run")
    let ends = ContinuousClock.now + deadline
    var request = request
    // An idle server may have ended meanwhile (a limit, a kill): one fresh start is tried
    // when it cannot take the job.
    var server: FrameServer
    var fromIdle: Bool
    switch take() {
    case .success(let taken): (server, fromIdle) = taken
    case .failure(let failure): return .failedToStart(failure.reason)
    }
    while true {
      let sent = withUnsafeBytes(of: &request) { bytes in
        descriptors.withUnsafeBufferPointer { fds in
          ts_job_send(
            server.control, bytes.baseAddress, bytes.count, fds.baseAddress, Int32(fds.count))
        }
      }
      if sent == 0 { break }
      server.process.end()
      guard fromIdle else {
        return .failedToStart(
          "the video worker's server took no job: \(SystemFiles.describe(-sent))")
      }
      switch launch() {
      case .success(let fresh): (server, fromIdle) = (fresh, false)
      case .failure(let failure): return .failedToStart(failure.reason)
      }
    }
    return wait(for: server, until: ends, cancellation: cancellation)
  }

  /// Waits for `server`'s reply; keeps the server for the next job when it answered well.
  private func wait(
    for server: FrameServer, until ends: ContinuousClock.Instant,
    cancellation: SandboxCancellation?
  ) -> SandboxOutcome {
    while true {
      let left = ends - ContinuousClock.now
      guard left > .zero else {
        server.process.end()
        return .timedOut
      }
      let woke = ts_job_wait(
        server.control, server.process.handle, cancellation?.descriptor ?? -1,
        Sandbox.slice(left))
      switch woke {
      case 0: continue
      case 1:
        var reply = tf_reply()
        let got = withUnsafeMutableBytes(of: &reply) {
          ts_job_receive(server.control, $0.baseAddress, $0.count, 0, nil, 0, nil)
        }
        if got == -Int(EAGAIN) { continue }
        guard got == MemoryLayout<tf_reply>.size, reply.magic == TF_REPLY_MAGIC else {
          server.process.end()
          return Self.killedWithServer
        }
        keep(server)
        return Sandbox.outcome(ofStatus: reply.status)
      case 2:
        // Work was withdrawn (a Dequeue, a caller gone): the idle servers go with it, so
        // nothing is left running for work nobody wants.
        server.process.end()
        endIdle()
        return .cancelled
      default:
        // The server ended (a job may kill it), or the wait failed: the job ends with it. A
        // server that could not bind FFmpeg says so by its exit, which every job would meet.
        let ended = server.process.end()
        if ended == .exited(Int32(TF_EXIT_UNAVAILABLE)) {
          return .exited(Int32(TF_EXIT_UNAVAILABLE))
        }
        return Self.killedWithServer
      }
    }
  }

  /// A job whose server ended under it: its process is killed with the sandbox.
  static let killedWithServer = SandboxOutcome.signalled(SIGKILL)

  /// An idle server (true), or a new one (false).
  private func take() -> Result<(FrameServer, Bool), SandboxLaunchFailure> {
    if let idle = state.withLock({ $0.idle.popLast() }) { return .success((idle.server, true)) }
    return launch().map { ($0, false) }
  }

  /// A new server in its sandbox.
  private func launch() -> Result<FrameServer, SandboxLaunchFailure> {
    var pair: [Int32] = [-1, -1]
    let made = pair.withUnsafeMutableBufferPointer { ts_job_socket($0.baseAddress) }
    guard made == 0 else {
      return .failure(
        SandboxLaunchFailure(reason: "no socket for the server: \(SystemFiles.describe(-made))"))
    }
    defer { close(pair[1]) }
    // The worker reaches the sandbox as a descriptor opened now: a worker replaced on the
    // host (an upgrade) is the one the next server runs.
    let program = open(worker, O_RDONLY | O_CLOEXEC)
    guard program >= 0 else {
      close(pair[0])
      return .failure(
        SandboxLaunchFailure(
          reason: "cannot open the video worker \(worker): \(SystemFiles.describe(errno))"))
    }
    defer { close(program) }
    var job = job
    job.standardInput = pair[1]
    job.program = program
    switch sandbox.launch(job) {
    case .success(let process):
      state.withLock { $0.started += 1 }
      return .success(FrameServer(process: process, control: pair[0]))
    case .failure(let failure):
      close(pair[0])
      return .failure(failure)
    }
  }

  /// Puts `server` back for the next job (or ends it, at its job limit or past the idle
  /// limit), and makes sure the keeper will end it once idle too long.
  private func keep(_ server: FrameServer) {
    server.jobs += 1
    let (kept, startKeeper) = state.withLock { state -> (Bool, Bool) in
      guard server.jobs < Self.jobLimit, state.idle.count < Self.idleLimit else {
        return (false, false)
      }
      state.idle.append(Idle(server: server, since: .now))
      let start = !state.keeperRunning
      state.keeperRunning = true
      return (true, start)
    }
    if !kept { server.process.end() }
    if startKeeper {
      SystemThread.detach(name: "thumbd-frames") { [self] in keepIdle() }
    }
  }

  /// Ends every idle server now.
  private func endIdle() {
    let idle = state.withLock { state in
      defer { state.idle.removeAll() }
      return state.idle.map(\.server)
    }
    for server in idle { server.process.end() }
  }

  /// The keeper: ends servers idle for ``idleTime``, and stops once none is idle.
  private func keepIdle() {
    while true {
      let now = ContinuousClock.now
      let (expired, next) = state.withLock { state -> ([FrameServer], ContinuousClock.Instant?) in
        let expired = state.idle.filter { $0.since + idleTime <= now }.map(\.server)
        state.idle.removeAll { $0.since + idleTime <= now }
        let next = state.idle.map { $0.since + idleTime }.min()
        if next == nil { state.keeperRunning = false }
        return (expired, next)
      }
      for server in expired { server.process.end() }
      guard let next else { return }
      let (seconds, attoseconds) = max(next - .now, .milliseconds(1)).components
      var pause = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
      _ = nanosleep(&pause, nil)
    }
  }
}

/// One server: its sandbox and the daemon's end of its control socket. Used by one job at a
/// time (handed over through `FrameServers`' lock).
final class FrameServer: @unchecked Sendable {
  // @unchecked: `jobs` is touched only by the one job holding the server.
  let process: SandboxProcess
  let control: Int32
  var jobs = 0

  init(process: SandboxProcess, control: Int32) {
    self.process = process
    self.control = control
  }

  deinit {
    process.end()
    close(control)
  }
}
