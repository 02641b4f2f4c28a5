import CSystem
import Foundation
import ImagePipeline
import Sandbox
import Testing
import ThumbSystem

@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Video frames from thumbd's worker in the sandbox (issue 54): every corpus video, the frame's
/// time against `ffmpeg -ss`, the hostile shapes, and the sandbox around the worker.
@Suite("Video frames", .serialized, .onLane(.clients))
struct VideoFramesTests {
  /// The worker built beside this test runner, in a sandbox of its own.
  static func frames(
    limits: SandboxLimits = VideoFrames.limits(deadline: .seconds(20)),
    label: String = "thumbd-tests"
  ) throws -> VideoFrames {
    PoolGuard.installed
    let worker = try #require(
      VideoFrames.findWorker(), "thumbd-frame must be built beside the tests (swift build)")
    let bwrap = try #require(Sandbox.findBubblewrap(), "scripts/bootstrap installs bubblewrap")
    let folder = TestDaemon.makeDirectory()
    chmod(folder, 0o711)
    return VideoFrames(
      sandbox: Sandbox(
        bwrap: bwrap, workFolder: folder + "/work",
        limits: limits),
      worker: worker, label: label)
  }

  static func thumbnailer(_ frames: VideoFrames) -> Thumbnailer {
    var thumbnailer = Thumbnailer()
    thumbnailer.frames = frames
    return thumbnailer
  }

  static func entries(_ expected: String) -> [Corpus.Entry] {
    Corpus.formats2Entries.filter { $0.kind.hasPrefix("video") && $0.expected == expected }
  }

  @Test("the worker runs in the sandbox here")
  func probe() async throws {
    let frames = try Self.frames()
    #expect(await SystemThread.run(name: "test-probe") { frames.probe() } == nil)
  }

  @Test(
    "a decode-ok video gives an upright thumbnail of its displayed size, from memory and file",
    arguments: entries("decode-ok"))
  func decodes(_ entry: Corpus.Entry) async throws {
    let made = try await CorpusChecks.madeOffPool(
      entry, thumbnailer: Self.thumbnailer(Self.frames()), box: 256)
    let (fromMemory, fromFile) = (try made[0].get(), try made[1].get())
    try CorpusChecks.expectUpright(fromMemory, entry, box: 256)
    #expect(fromFile == fromMemory)
  }

  @Test("a must-reject video gets a typed refusal", arguments: entries("must-reject"))
  func rejects(_ entry: Corpus.Entry) async throws {
    let made = try await CorpusChecks.madeOffPool(
      entry, thumbnailer: Self.thumbnailer(Self.frames()), box: 256)
    CorpusChecks.expectRejected(made, entry)
  }

  @Test("an either video decodes inside the box or is refused", arguments: entries("either"))
  func handles(_ entry: Corpus.Entry) async throws {
    let made = try await CorpusChecks.madeOffPool(
      entry, thumbnailer: Self.thumbnailer(Self.frames()), box: 256)
    CorpusChecks.expectHandled(made, box: 256)
  }

  @Test("the video's own size and length are reported, not the frame's")
  func sourceSizeAndLength() throws {
    let entry = try #require(
      Corpus.formats2Entries.first { $0.path.hasSuffix("bbb_800x640_768kbps_30fps_vp9.mp4") })
    let thumbnail = try Self.thumbnailer(Self.frames()).thumbnail(
      .path(entry.url), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)))
    #expect(thumbnail.sourceWidth == 1138 && thumbnail.sourceHeight == 640)
    #expect(thumbnail.width == 64 && thumbnail.height == 36)
    #expect(thumbnail.duration == .milliseconds(4000))
  }

  @Test("a worker's header whose sides multiply past Int.max is refused, not a trap")
  func overflowingHeader() throws {
    let file = ts_memory_file()
    try #require(file >= 0)
    defer { close(file) }
    var bytes = Array("TDFRAME1".utf8)
    for field: UInt32 in [0xD200_0007, 0xE000_0004, 0, 0, 0, 0, 0] {
      bytes += (0..<4).map { UInt8(truncatingIfNeeded: field >> (8 * $0)) }
    }
    bytes += [UInt8](repeating: 0x3C, count: 64)
    #expect(bytes.withUnsafeBytes { pwrite(file, $0.baseAddress, $0.count, 0) } == bytes.count)
    #expect(throws: ThumbnailError.self) {
      _ = try VideoFrames.read(file, box: (0, 0), maxPixels: Int.max)
    }
  }

  @Test("without a worker a video is refused as unsupported, naming what is missing")
  func noWorker() throws {
    let entry = try #require(Self.entries("decode-ok").first)
    #expect {
      _ = try Thumbnailer().thumbnail(
        .path(entry.url), spec: ValidSpec(ThumbnailSpec(width: 64, height: 64)))
    } throws: { error in
      guard let error = error as? ThumbnailError, case .unsupportedFormat(let message) = error
      else { return false }
      return message.contains("thumbd-frame")
    }
  }

  /// Corpus videos long enough for the chosen time (10% in) to be past the first second.
  static let timed = [
    "video-valid/imageio-test-images/cockatoo.mp4", "video-valid/popcorn-js/trailer.ogv",
    "video-valid/mdn-learning-area/rabbit320.webm", "video-valid/androidx-media/sample.avi",
    "video-valid/metadata-extractor-images/sample.3gp",
  ]

  @Test(
    "the frame is within 2 s of 10% in, and is the frame ffmpeg -ss gives at its time",
    arguments: timed)
  func chosenTime(_ relative: String) async throws {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg") else {
      Issue.record("ffmpeg is needed (scripts/bootstrap installs it)")
      return
    }
    let path = Corpus.path(relative)
    let file = open(path, O_RDONLY | O_CLOEXEC)
    try #require(file >= 0)
    defer { close(file) }
    let frame = try Self.frames().frame(
      ofFile: file, source: .video(.mp4), name: relative, width: 160, height: 160,
      limits: DecodingLimits(),
      cancellation: nil)
    let duration = try #require(frame.duration)
    let time = try #require(frame.time)
    let chosen = duration / 10
    #expect(time >= chosen - .seconds(2) && time <= chosen + .seconds(2), "\(time) for \(chosen)")
    let ours = try Thumbnailer().decodeFullResolution(.bytes(frame.image))
    let milliseconds =
      time.components.seconds * 1000 + time.components.attoseconds / 1_000_000_000_000_000
    let seconds = "\(milliseconds / 1000).\(String(1000 + milliseconds % 1000).dropFirst())"
    let output = TestDaemon.makeDirectory() + "/frame.rgb"
    defer {
      try? FileManager.default.removeItem(atPath: (output as NSString).deletingLastPathComponent)
    }
    let run = try await ChildProcess.runThumbd(
      [
        "-v", "error", "-ss", seconds, "-i", path, "-frames:v", "1", "-vf",
        "scale=\(ours.width):\(ours.height):flags=area", "-f", "rawvideo", "-pix_fmt", "rgb24", "-",
      ], standardOutput: output, binary: "/usr/bin/ffmpeg")
    let pixels = Array((try? Data(contentsOf: URL(fileURLWithPath: output))) ?? Data())
    guard pixels.count == ours.width * ours.height * 3 else {
      Issue.record("ffmpeg gave no frame at \(seconds) s: \(run.standardError)")
      return
    }
    let reference = Bitmap(pixels: pixels, width: ours.width, height: ours.height, channels: 3)
    let psnr = ImageMetrics.psnr(ours, reference)
    #expect(psnr >= 28, "\(relative) at \(seconds) s: \(psnr) dB against ffmpeg -ss")
  }

  @Test(
    "each hostile shape gets a typed refusal within 1 s of CPU and 64 MiB",
    arguments: MatroskaWriter.hostile.indices)
  func hostile(_ index: Int) async throws {
    let (name, bytes) = MatroskaWriter.hostile[index]
    #expect(VideoContainer.sniff(bytes) == .matroska)
    let started = ContinuousClock.now
    #expect(throws: ThumbnailError.self, "\(name)") {
      _ = try Self.thumbnailer(Self.frames()).thumbnail(
        .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 256, height: 256)))
    }
    #expect(started.duration(to: .now) < .seconds(5), "\(name)")
    // The worker alone under GNU time: its CPU and peak RSS, FFmpeg's libraries included.
    let folder = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    try Data(bytes).write(to: URL(fileURLWithPath: folder + "/input.mkv"))
    let worker = try Self.frames().worker
    let run = try await ChildProcess.runThumbd(
      ["input.mkv", "256", "256", "100000000"], measuringMemory: true,
      standardInput: folder + "/input.mkv", binary: worker)
    #expect([65, 66, 67].contains(run.status), "\(name): exit \(run.status) \(run.standardError)")
    #expect(run.cpuSeconds < 1, "\(name): \(run.cpuSeconds) s of CPU")
    #expect(run.maxRSSKiB > 0 && run.maxRSSKiB < 64 << 10, "\(name): \(run.maxRSSKiB) KiB")
  }

  @Test("a 4K AV1 frame, found after a dark first try, peaks under 64 MiB in the worker")
  func largeFrameMemory() async throws {
    // Its first try lands on a dark frame, so a second is decoded: the first's full-size
    // picture must have gone back to the decoder by then (it peaked at 67 MiB while held).
    let worker = try Self.frames().worker
    let run = try await ChildProcess.runThumbd(
      ["input.mp4", "256", "256", "100000000"], measuringMemory: true,
      standardInput: Corpus.path("video-valid/androidx-media/long_4k_av1.mp4"), binary: worker)
    #expect(run.status == 0, "exit \(run.status): \(run.standardError)")
    #expect(run.maxRSSKiB > 0 && run.maxRSSKiB < 64 << 10, "\(run.maxRSSKiB) KiB")
  }

  /// A video on the host, outside what the worker is given, and files that name it.
  static func planted() throws -> (folder: String, video: String) {
    let folder = TestDaemon.makeDirectory()
    chmod(folder, 0o755)
    let video = folder + "/planted.webm"
    try Data(Corpus.bytes("video-valid/mdn-learning-area/rabbit320.webm")).write(
      to: URL(fileURLWithPath: video))
    chmod(video, 0o644)
    return (folder, video)
  }

  @Test("a playlist or concat list naming a planted video gets nothing of it")
  func plantedThroughPlaylists() throws {
    let (folder, video) = try Self.planted()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let frames = try Self.frames()
    let lists = [
      (
        "list.m3u8",
        "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile://\(video)\n#EXT-X-ENDLIST\n"
      ),
      ("list.ffconcat", "ffconcat version 1.0\nfile '\(video)'\n"),
      ("list.m3u8", "#EXTM3U\n#EXTINF:10,\n\(video)\n"),
    ]
    for (name, text) in lists {
      let path = folder + "/" + name
      try text.write(toFile: path, atomically: false, encoding: .utf8)
      let file = open(path, O_RDONLY | O_CLOEXEC)
      try #require(file >= 0)
      defer { close(file) }
      #expect(throws: ThumbnailError.self, "\(name)") {
        _ = try frames.frame(
          ofFile: file, source: .video(.mp4), name: name, width: 64, height: 64,
          limits: DecodingLimits(),
          cancellation: nil)
      }
    }
  }

  @Test("in the worker's sandbox a planted file outside its input cannot be opened")
  func plantedStaysHidden() throws {
    let (folder, video) = try Self.planted()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let frames = try Self.frames()
    let input = open(Corpus.path(Self.timed[0]), O_RDONLY | O_CLOEXEC)
    let output = ts_memory_file()
    let program = open(frames.worker, O_RDONLY | O_CLOEXEC)
    defer { for file in [input, output, program] { close(file) } }
    var job = frames.job(
      name: "x.mp4", box: (64, 64), maxPixels: 1 << 26, input: input, output: output,
      program: program)
    // The worker's whole setup, with a program that tries the planted path instead.
    job.arguments = ["/usr/bin/head", "-c", "64", video]
    let run = frames.sandbox.run(job, cancellation: nil)
    run.discard()
    #expect(run.outcome != .exited(0), "\(run.messages)")
    var status = stat()
    #expect(fstat(output, &status) == 0 && status.st_size == 0, "the child read the planted file")
    // And the worker itself, with the same setup, works: the refusal is the sandbox's.
    job.arguments = Array(
      frames.job(
        name: "x.mp4", box: (64, 64), maxPixels: 1 << 26, input: input, output: output,
        program: program
      ).arguments)
    let worked = frames.sandbox.run(job, cancellation: nil)
    worked.discard()
    #expect(worked.outcome == .exited(0), "\(worked.messages)")
  }

  @Test("a worker past its deadline is killed, and no process of it is left")
  func deadline() async throws {
    // A 4K AV1 keyframe at full size takes the worker well over 40 ms (loading FFmpeg alone
    // takes about 30).
    var short = VideoFrames.limits(deadline: .seconds(1))
    short.deadline = .milliseconds(40)
    let marker = FrameServerTests.marker()
    let frames = try Self.frames(limits: short, label: marker)
    let file = open(Corpus.path("video-valid/androidx-media/long_4k_av1.mp4"), O_RDONLY | O_CLOEXEC)
    try #require(file >= 0)
    defer { close(file) }
    let started = ContinuousClock.now
    #expect {
      _ = try frames.frame(
        ofFile: file, source: .video(.mp4), name: "x.mp4", width: 0, height: 0,
        limits: DecodingLimits(),
        cancellation: nil)
    } throws: { error in
      guard let error = error as? ThumbnailError, case .timedOut = error else { return false }
      return true
    }
    #expect(started.duration(to: .now) < .seconds(3))
    await eventually("no worker left") { DelegatedFixtures.processes(holding: marker) == 0 }
  }

  @Test("cancelling the decode kills the worker's whole group at once")
  func cancellation() async throws {
    // A worker that never ends (a shell waiting on a child), so the cancellation always
    // finds it running: what is tested is the flag reaching the sandbox.
    let folder = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let script = folder + "/stuck-worker"
    try "#!/bin/sh\nsleep 3600\n".write(toFile: script, atomically: false, encoding: .utf8)
    chmod(script, 0o755)
    let real = try Self.frames()
    let marker = FrameServerTests.marker()
    let frames = VideoFrames(sandbox: real.sandbox, worker: script, label: marker)
    let flag = CancellationFlag()
    let path = Corpus.path(Self.timed[0])
    // On a thread of its own: the run blocks its thread until it is cancelled.
    let running = StartedThread {
      let file = open(path, O_RDONLY | O_CLOEXEC)
      defer { close(file) }
      do throws(ThumbnailError) {
        _ = try frames.frame(
          ofFile: file, source: .video(.mp4), name: "x.mp4", width: 0, height: 0,
          limits: DecodingLimits(),
          cancellation: flag)
        return "made"
      } catch {
        return error.kind
      }
    }
    await eventually("the worker started") {
      DelegatedFixtures.processes(holding: marker) > 0
    }
    let started = ContinuousClock.now
    flag.cancel()
    #expect(try await running.value == ThumbnailError.cancelled.kind)
    #expect(started.duration(to: .now) < .seconds(1))
    await eventually("no process of it left") {
      DelegatedFixtures.processes(holding: marker) == 0
        && DelegatedFixtures.processes(holding: "sleep\u{0}3600") == 0
    }
    #expect(frames.runCounts["cancelled"] == 1)
  }

  @Test("a video's freedesktop entry carries its length and type")
  func desktopEntry() throws {
    let folder = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let cache = FreedesktopCache(directory: folder + "/thumbnails", software: "thumbd test")
    let maker = DesktopThumbnailer(
      cache: cache, thumbnailer: Self.thumbnailer(try Self.frames()), maxSourceBytes: 1 << 30)
    let video = folder + "/clip.mp4"
    try Data(Corpus.bytes("video-valid/imageio-test-images/cockatoo.mp4")).write(
      to: URL(fileURLWithPath: video))
    let outcome = maker.thumbnail(path: video, flavors: [.normal])
    guard case .made(let entries) = outcome, let entry = entries[.normal] else {
      Issue.record("\(outcome)")
      return
    }
    let bytes = try Data(contentsOf: URL(fileURLWithPath: entry))
    let text = String(decoding: bytes, as: UTF8.self)
    #expect(text.contains("Thumb::Movie::Length\u{0}14"))
    #expect(text.contains("Thumb::Mimetype\u{0}video/mp4"))
    #expect(maker.mediaTypes.contains("video/webm"))
  }
}
