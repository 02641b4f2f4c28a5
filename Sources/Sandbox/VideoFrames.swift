import CSystem
import ImagePipeline
import Synchronization
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Video frames and drawings' pictures (a PDF's first page, an SVG) from thumbd's worker,
/// `thumbd-frame`, in the `Sandbox`: FFmpeg's demuxers and decoders, poppler and librsvg never
/// run in thumbd's own process. Each file's picture is made by a process forked for it from a
/// worker that serves many files (`FrameServers`).
///
/// Rules kept here:
/// - the job's process gets the file as its stdin, one descriptor opened read-only (no path
///   of it is bound), and writes its frame to a memory file of its own, bounded by the
///   sandbox's file-size limit, and its messages to another; nothing else it could write is
///   read;
/// - what it wrote is untrusted: the header is checked against the size asked for, and the
///   picture is handed on as bytes for thumbd's own BMP decoder (`Thumbnailer`), under the
///   caller's limits;
/// - the worker's exit code becomes the error a decode of an image would give
///   (`unsupportedFormat`, `corrupt`, `tooLarge`); a deadline, a signal or a crash is
///   `corrupt` for that file, never a fault of the daemon.
public struct VideoFrames: FrameExtractor {
  /// The sandbox each run gets.
  public let sandbox: Sandbox
  /// The worker program, on the host.
  public let worker: String
  /// Host folders the worker needs shown (the Swift runtime of a build that does not carry
  /// it); empty for an installed thumbd.
  public let runtimeFolders: [String]

  /// Runs so far, by outcome: `made`, `refused` (not a video it reads, or frames over the
  /// limit), `corrupt` (its frames do not decode), `timed_out`, `cancelled` (every caller
  /// left: the sandbox was killed), `failed` (a signal, a crash, or no start) and
  /// `unusable_output` (what it wrote is not a frame thumbd accepts).
  public var runCounts: [String: Int] { counts.snapshot }
  private let counts = SharedCounts()
  /// The workers serving jobs.
  private let servers: FrameServers
  /// The name the servers carry in their command line (`thumbd-frame --serve LABEL`).
  public let label: String

  /// Worker servers started so far (each serves many files).
  public var serversStarted: Int { servers.started }

  /// The worker's file name, installed beside `thumbd`.
  public static let workerName = "thumbd-frame"

  /// How long a worker's server waits idle for its next video before it is ended, by
  /// default: long enough for the next file of a folder, short enough that none is left soon
  /// after the work.
  public static let serverIdleTime: Duration = .milliseconds(500)

  /// Frames from `worker` run in `sandbox`, its servers named `label` in process listings and
  /// ended after `idleTime` idle.
  public init(
    sandbox: Sandbox, worker: String, label: String = "thumbd-\(getpid())",
    idleTime: Duration = serverIdleTime
  ) {
    self.sandbox = sandbox
    self.worker = worker
    self.label = label
    let runtimeFolders = Self.swiftRuntimeFolder().map { [$0] } ?? []
    self.runtimeFolders = runtimeFolders
    var server = SandboxJob(arguments: [SandboxJob.programPath, "--serve", label])
    server.readOnlyFolders = runtimeFolders
    servers = FrameServers(sandbox: sandbox, worker: worker, job: server, idleTime: idleTime)
  }

  /// The limits a worker runs under: a video's frame needs one decode, so less than an
  /// installed thumbnailer may take; the deadline is the caller's decode time-out.
  public static func limits(deadline: Duration) -> SandboxLimits {
    var limits = SandboxLimits()
    limits.cpuSeconds = 20
    limits.addressSpace = 1 << 30
    limits.processes = 16
    limits.temporaryBytes = 1 << 20
    limits.deadline = min(max(deadline, .seconds(1)), .seconds(60))
    return limits
  }

  /// Video frames in this environment: bubblewrap, the worker beside the running program,
  /// and a sandbox it runs in (probed once); or why there are none.
  public static func installed(
    environment: [String: String], deadline: Duration
  ) -> Result<VideoFrames, UnusableReason> {
    guard let bwrap = Sandbox.findBubblewrap() else {
      return .failure(UnusableReason(text: "bubblewrap is not installed (the bubblewrap package)"))
    }
    guard let worker = findWorker() else {
      return .failure(
        UnusableReason(
          text: "no \(workerName) beside thumbd (build it: swift build --product \(workerName))"))
    }
    let sandbox = Sandbox(
      bwrap: bwrap, workFolder: Sandbox.defaultWorkFolder(environment: environment),
      limits: limits(deadline: deadline))
    let frames = VideoFrames(sandbox: sandbox, worker: worker)
    if let problem = frames.probe() { return .failure(UnusableReason(text: problem)) }
    return .success(frames)
  }

  /// Why video frames cannot be made here.
  public struct UnusableReason: Error, Sendable {
    /// The reason, in words.
    public let text: String
  }

  /// The worker beside the running program (`thumbd`'s own folder), or nil.
  public static func findWorker() -> String? {
    guard let program = SystemFiles.realPath("/proc/self/exe") else { return nil }
    let candidate = SystemFiles.parent(of: program) + "/" + workerName
    return access(candidate, X_OK) == 0 ? candidate : nil
  }

  /// The folder of the Swift runtime this process loaded, when it is a shared library
  /// outside `/usr`: a worker built beside it (a debug build) loads the same one.
  static func swiftRuntimeFolder() -> String? {
    guard let name = cs_library_of("swift_retain") else { return nil }
    let path = String(cString: name)
    guard path.contains("libswiftCore"), !path.hasPrefix("/usr/") else { return nil }
    return SystemFiles.parent(of: path)
  }

  /// Why the worker cannot run here, or nil: it is started in the sandbox with no
  /// arguments and must answer with its usage.
  public func probe() -> String? {
    let program = open(worker, O_RDONLY | O_CLOEXEC)
    guard program >= 0 else { return "cannot open \(worker): \(SystemFiles.describe(errno))" }
    defer { close(program) }
    var job = SandboxJob(arguments: [SandboxJob.programPath])
    job.program = program
    job.readOnlyFolders = runtimeFolders
    let run = sandbox.run(job, cancellation: nil)
    defer { run.discard() }
    guard run.outcome == .exited(Self.usageExit) else {
      return "\(worker) does not run in the sandbox (\(run.outcome)): \(run.messages.prefix(300))"
    }
    return nil
  }

  /// The run that makes one frame: the worker (open at `program`) bound at
  /// ``SandboxJob/programPath``, reading the video from `input` as its stdin and writing to
  /// `output` as its stdout, with the runtime folders it needs.
  public func job(
    name: String, box: (Int, Int), maxPixels: Int, input: Int32, output: Int32, program: Int32
  ) -> SandboxJob {
    var job = SandboxJob(arguments: [
      SandboxJob.programPath, SandboxJob.inputName(for: name), String(box.0), String(box.1),
      String(max(1, maxPixels)),
    ])
    job.standardInput = input
    job.standardOutput = output
    job.program = program
    job.readOnlyFolders = runtimeFolders
    return job
  }

  /// The job for a file named `name` holding `source`: the box, the pixel limit and the name
  /// the job's process sees (``SandboxJob/inputName(for:)``, which keeps only a short plain
  /// extension).
  static func request(
    name: String, source: FrameSource = .video(.mp4), box: (Int, Int), maxPixels: Int
  ) -> tf_request {
    var request = tf_request()
    request.magic = TF_REQUEST_MAGIC
    request.kind =
      switch source {
      case .video: TF_KIND_VIDEO
      case .drawing(.pdf): TF_KIND_PDF
      case .drawing(.svg): TF_KIND_SVG
      }
    request.width = UInt32(box.0)
    request.height = UInt32(box.1)
    request.max_pixels = UInt64(min(max(1, maxPixels), 1 << 40))
    let inside = Array(SandboxJob.inputName(for: name).utf8.prefix(Int(TF_NAME_SIZE) - 1))
    withUnsafeMutableBytes(of: &request.name) { bytes in
      for (index, byte) in inside.enumerated() { bytes[index] = byte }
    }
    return request
  }

  /// The worker's exit codes and header (`TF_*` in CSystem.h, which the worker writes by).
  static let usageExit = Int32(TF_EXIT_USAGE)
  static let unsupportedExit = Int32(TF_EXIT_UNSUPPORTED)
  static let tooLargeExit = Int32(TF_EXIT_TOO_LARGE)
  static let unavailableExit = Int32(TF_EXIT_UNAVAILABLE)
  static let magic = Array(TF_MAGIC.utf8)
  static let headerSize = Int(TF_HEADER_SIZE)
  static let unknown = UInt32(TF_UNKNOWN)

  /// The picture of the video or drawing open at `descriptor`, made by the worker in the
  /// sandbox.
  public func frame(
    ofFile descriptor: Int32, source: FrameSource, name: String, width: Int, height: Int,
    limits: DecodingLimits, cancellation: CancellationFlag?
  ) throws(ThumbnailError) -> ExtractedFrame {
    let output = ts_memory_file()
    guard output >= 0 else { throw .io("no memory file for the video worker") }
    defer { close(output) }
    let messages = ts_memory_file()
    guard messages >= 0 else { throw .io("no memory file for the video worker") }
    defer { close(messages) }
    let box = (min(max(width, 0), 65_535), min(max(height, 0), 65_535))
    // The job reads the file from its stdin, by descriptor: no path of it is bound.
    let input = open("/proc/self/fd/\(descriptor)", O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard input >= 0 else { throw .io("cannot reopen the source read-only") }
    defer { close(input) }
    let stop = SandboxCancellation()
    cancellation?.whenCancelled { stop.cancel() }
    let outcome = servers.run(
      Self.request(name: name, source: source, box: box, maxPixels: limits.maxPixels),
      descriptors: [input, output, messages], deadline: sandbox.limits.deadline,
      cancellation: stop)
    let reason = Self.reason(Sandbox.head(of: messages))
    counts.count(Self.outcome(outcome))
    switch outcome {
    case .exited(0): break
    case .cancelled: throw .cancelled
    case .timedOut:
      throw .timedOut("the frame worker passed its deadline of \(sandbox.limits.deadline)")
    case .failedToStart(let why): throw .io("the frame worker could not start: \(why)")
    case .signalled(let signal):
      throw .corrupt("the frame worker was ended by signal \(signal)\(reason)")
    case .exited(Self.unsupportedExit):
      throw .unsupportedFormat("\(source.description) thumbd cannot read\(reason)")
    case .exited(Self.tooLargeExit):
      throw .tooLarge(width: 0, height: 0, message: "\(source.description), too large\(reason)")
    case .exited(Self.unavailableExit):
      // Not the file's fault, and an installed thumbnailer may still read it (the desktop
      // falls back to one for a type thumbd refuses as unsupported).
      throw .unsupportedFormat(
        "\(source.description), and its library is not installed\(reason)")
    case .exited(let code):
      throw .corrupt("\(source.description) that does not decode (\(code))\(reason)")
    }
    do {
      let frame = try Self.read(output, box: box, maxPixels: limits.maxPixels)
      counts.count("made")
      return frame
    } catch {
      counts.count("unusable_output")
      throw error
    }
  }

  /// A run's outcome as `runCounts` names it (`made` is counted once its output is read).
  static func outcome(_ outcome: SandboxOutcome) -> String {
    switch outcome {
    case .exited(0): "exited"
    case .exited(unsupportedExit), .exited(tooLargeExit): "refused"
    case .exited(Int32(TF_EXIT_CORRUPT)): "corrupt"
    case .timedOut: "timed_out"
    case .cancelled: "cancelled"
    case .exited, .signalled, .failedToStart: "failed"
    }
  }

  /// The first line the worker wrote about itself, for messages.
  static func reason(_ messages: String) -> String {
    guard
      let line = messages.split(separator: "\n").first(where: { $0.hasPrefix("thumbd-frame: ") })
    else { return "" }
    return ": " + line.dropFirst("thumbd-frame: ".count).prefix(200)
  }

  /// The header and picture in `file`, checked: the size no more than twice the box on a
  /// bounded side (or the pixel limit for a free box), the bytes exactly a 24-bit BMP's (a
  /// 32-bit one with an alpha mask, when the header's flag says so).
  package static func read(_ file: Int32, box: (Int, Int), maxPixels: Int) throws(ThumbnailError)
    -> ExtractedFrame
  {
    var status = stat()
    guard fstat(file, &status) == 0 else { throw .io("cannot read the video worker's output") }
    let size = Int(status.st_size)
    var header = [UInt8](repeating: 0, count: headerSize)
    let got = header.withUnsafeMutableBytes { pread(file, $0.baseAddress, headerSize, 0) }
    guard got == headerSize, Array(header[0..<8]) == magic else {
      throw .corrupt("the frame worker wrote no picture")
    }
    func field(_ offset: Int) -> UInt32 {
      (0..<4).reduce(UInt32(0)) { $0 | UInt32(header[offset + $1]) << (8 * $1) }
    }
    let (width, height) = (Int(field(8)), Int(field(12)))
    // The worker covers the box twice over and never enlarges: one bounded side is at most
    // twice the box's (a free box is bounded by the pixel limit alone).
    let bounded =
      (box.0 == 0 && box.1 == 0) || (box.0 > 0 && width <= 2 * box.0 + 2)
      || (box.1 > 0 && height <= 2 * box.1 + 2)
    // Each side first (the worker's widest is 32,768), so the product cannot overflow.
    guard (1...65_535).contains(width), (1...65_535).contains(height), bounded,
      width * height <= max(1, maxPixels)
    else {
      throw .corrupt("the frame worker wrote a picture of \(width)x\(height), not what was asked")
    }
    let alpha = field(24) & UInt32(TF_FLAG_ALPHA) != 0
    let stride = alpha ? width * 4 : (width * 3 + 3) & ~3
    let expected = headerSize + (alpha ? 122 : 54) + stride * height
    guard size == expected else {
      throw .corrupt("the frame worker wrote \(size) bytes, not a \(width)x\(height) frame")
    }
    var image = [UInt8](repeating: 0, count: expected - headerSize)
    let read = image.withUnsafeMutableBytes {
      pread(file, $0.baseAddress, $0.count, off_t(headerSize))
    }
    guard read == image.count else { throw .io("cannot read the video worker's frame") }
    let duration = field(20)
    let shown = (Int(field(28)), Int(field(32)))
    return ExtractedFrame(
      image: image, time: .milliseconds(Int(field(16))),
      duration: duration == unknown ? nil : .milliseconds(Int(duration)),
      sourceSize: shown.0 > 0 && shown.1 > 0 && shown.0 <= 1 << 20 && shown.1 <= 1 << 20
        ? shown : nil)
  }
}

/// Counters shared by the copies of a `VideoFrames` (a value type).
final class SharedCounts: Sendable {
  private let counts = Mutex<[String: Int]>([:])

  func count(_ outcome: String) {
    guard outcome != "exited" else { return }
    counts.withLock { $0[outcome, default: 0] += 1 }
  }

  var snapshot: [String: Int] { counts.withLock { $0 } }
}

/// `VideoFrames` set up when the first video or drawing comes (a command that never meets one
/// never starts a sandbox); if they cannot be, every one is refused with the reason.
public final class LazyVideoFrames: FrameExtractor {
  private let environment: [String: String]
  private let deadline: Duration
  private let state = Mutex<Result<VideoFrames, VideoFrames.UnusableReason>?>(nil)

  /// Frames for `environment`, each under `deadline`.
  public init(environment: [String: String], deadline: Duration) {
    self.environment = environment
    self.deadline = deadline
  }

  /// The frames, or why there are none (set up on the first call).
  public var resolved: Result<VideoFrames, VideoFrames.UnusableReason> {
    state.withLock { state in
      if let state { return state }
      let made = VideoFrames.installed(environment: environment, deadline: deadline)
      state = made
      return made
    }
  }

  /// The picture from the worker, set up now if this is the first video or drawing.
  public func frame(
    ofFile descriptor: Int32, source: FrameSource, name: String, width: Int, height: Int,
    limits: DecodingLimits, cancellation: CancellationFlag?
  ) throws(ThumbnailError) -> ExtractedFrame {
    switch resolved {
    case .failure(let reason):
      throw .unsupportedFormat(
        "\(source.description), and thumbd's worker is unavailable: \(reason.text)")
    case .success(let frames):
      return try frames.frame(
        ofFile: descriptor, source: source, name: name, width: width, height: height,
        limits: limits, cancellation: cancellation)
    }
  }
}
