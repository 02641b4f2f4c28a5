import Foundation
import Testing
import ThumbSystem
import ThumbWire

@testable import ImagePipeline
@testable import TestSupport

/// `DesktopJobs` share one job per file and flavor between callers, through the pipeline's
/// coalescing stage: a caller leaving drops only its own interest.
@Suite("Desktop jobs")
struct DesktopJobsTests {
  /// A pipeline with one foreground decode thread and this memory budget.
  static func pipeline(memoryBudget: Int = 256 << 20) -> ThumbnailPipeline {
    ThumbnailPipeline(
      configuration: .init(
        dataLoader: GatedLoader { _ in [] }, decodeThreads: 1, memoryBudget: memoryBudget))
  }

  /// A desktop thumbnailer writing under `directory`/thumbnails.
  static func thumbnailer(in directory: String) -> DesktopThumbnailer {
    DesktopThumbnailer(
      cache: FreedesktopCache(directory: directory + "/thumbnails", software: "test"),
      thumbnailer: Thumbnailer(), maxSourceBytes: 64 << 20)
  }

  /// A pipeline with one foreground decode thread, held busy by a gated job until `open()`.
  struct Held {
    let pipeline: ThumbnailPipeline
    let jobs: DesktopJobs
    let directory: String
    let photo: String
    let gate = DispatchSemaphore(value: 0)
    let blocker: Task<Void, any Error>

    init() async throws {
      directory = TestDaemon.makeDirectory()
      photo = directory + "/photo.jpg"
      try FileManager.default.copyItem(atPath: Corpus.path("photo/coil/normal.jpg"), toPath: photo)
      pipeline = DesktopJobsTests.pipeline()
      jobs = DesktopJobs(
        pipeline: pipeline, thumbnailer: DesktopJobsTests.thumbnailer(in: directory))
      let (pipeline, gate) = (pipeline, gate)
      blocker = Task {
        try await pipeline.decoders.run(context: JobContext(priority: .visible)) { _ in
          gate.wait()
        }
      }
      await eventually("the decode thread is held") { pipeline.decoders.load.running == 1 }
    }

    func ask() -> Task<DesktopThumbnailer.Outcome, any Error> {
      Task { [jobs, photo] in
        try await jobs.thumbnail(path: photo, flavor: .normal, priority: .visible)
      }
    }

    func open() async throws {
      gate.signal()
      try await blocker.value
    }

    var entry: String {
      jobs.thumbnailer.cache.path(forURI: PercentEncoding.fileURI(path: photo), flavor: .normal)
    }
  }

  @Test("two callers of one file share one job; the one that leaves does not stop it for the other")
  func shared() async throws {
    let held = try await Held()
    defer { try? FileManager.default.removeItem(atPath: held.directory) }
    let first = held.ask()
    await eventually("one job queued") { held.pipeline.decoders.load.queued == 1 }
    let second = held.ask()
    await eventually("the second joined it") {
      held.pipeline.metrics.snapshot().coalescedJoins == 1
    }
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    #expect(held.pipeline.decoders.load.queued == 1, "still wanted by the second")
    try await held.open()
    guard case .made(let paths) = try await second.value else {
      Issue.record("not made")
      return
    }
    #expect(paths[.normal] == held.entry && FileManager.default.fileExists(atPath: held.entry))
    let metrics = held.pipeline.metrics.snapshot()
    #expect(metrics.desktopJobs == 1 && metrics.cancelledWork == 0)
  }

  @Test(
    "a job's decode counts its colour profile with the pipeline's; an answer from the cache does not"
  )
  func profileCounted() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let photo = directory + "/p3.jpg"
    try FileManager.default.copyItem(
      atPath: Corpus.path("icc/danbooru/countergirl-p3.jpg"), toPath: photo)
    let pipeline = Self.pipeline()
    let jobs = DesktopJobs(pipeline: pipeline, thumbnailer: Self.thumbnailer(in: directory))
    for cached in [false, true] {
      let outcome = try await jobs.thumbnail(path: photo, flavor: .normal, priority: .visible)
      #expect((outcome == .cached) == cached, "\(outcome)")
      #expect(pipeline.metrics.snapshot().profiles == ["converted": 1])
    }
  }

  @Test(
    "a job waits for its decode's estimate in memory_budget before it takes a decode thread; one larger than the whole budget waits for all of it"
  )
  func budgeted() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let photo = directory + "/photo.jpg"
    try FileManager.default.copyItem(atPath: Corpus.path("photo/coil/normal.jpg"), toPath: photo)
    let pipeline = Self.pipeline(memoryBudget: 16 << 20)
    let thumbnailer = Self.thumbnailer(in: directory)
    let jobs = DesktopJobs(pipeline: pipeline, thumbnailer: thumbnailer)
    let estimate = thumbnailer.estimate(path: photo, flavor: .large)
    #expect(estimate > 0)
    // Another decode holds the whole budget.
    let held = try await pipeline.budget.reserve(
      16 << 20, priority: PriorityBox(.visible), unblocks: true)
    let job = Task { try await jobs.thumbnail(path: photo, flavor: .large, priority: .visible) }
    await eventually("the job waits for the budget") { pipeline.memoryBudget.waiting == 1 }
    #expect(pipeline.decoders.load.running == 0 && pipeline.decoders.load.queued == 0)
    held.release()
    guard case .made = try await job.value else {
      Issue.record("not made")
      return
    }
    #expect(pipeline.memoryBudget.waits == 1 && pipeline.memoryBudget.work == 0)

    // A budget smaller than this decode alone: it is not refused (the pixel and byte limits
    // decide that), but takes the whole budget, so it waits while any of it is held.
    let small = Self.pipeline(memoryBudget: estimate - 1)
    let alone = DesktopJobs(pipeline: small, thumbnailer: thumbnailer)
    try FileManager.default.removeItem(atPath: directory + "/thumbnails")
    let little = try await small.budget.reserve(1, priority: PriorityBox(.visible), unblocks: true)
    let large = Task { try await alone.thumbnail(path: photo, flavor: .large, priority: .visible) }
    await eventually("the large job waits") { small.memoryBudget.waiting == 1 }
    little.release()
    guard case .made = try await large.value else {
      Issue.record("not made")
      return
    }
    #expect(small.memoryBudget.peakWork == estimate - 1 && small.memoryBudget.refusals == 0)
  }

  @Test("when every caller leaves, the queued job never runs and nothing is written")
  func abandoned() async throws {
    let held = try await Held()
    defer { try? FileManager.default.removeItem(atPath: held.directory) }
    let first = held.ask()
    await eventually("one job queued") { held.pipeline.decoders.load.queued == 1 }
    let second = held.ask()
    await eventually("the second joined it") {
      held.pipeline.metrics.snapshot().coalescedJoins == 1
    }
    first.cancel()
    second.cancel()
    await eventually("the job is dropped") { held.pipeline.metrics.snapshot().cancelledWork == 1 }
    await eventually("the queue is empty") { held.pipeline.decoders.load.queued == 0 }
    try await held.open()
    #expect(held.pipeline.metrics.snapshot().desktopJobs == 0)
    #expect(!FileManager.default.fileExists(atPath: held.entry))
  }
}
