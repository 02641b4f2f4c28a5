import ImagePipeline
import Synchronization
import Testing

@testable import TestSupport
@testable import ThumbServer

/// `ThumbnailerService`'s schedule and signals, on gated fake work: which jobs start when, what
/// a dequeue, a replace or a caller leaving stops, and the order of each request's signals.
@Suite("Thumbnailer1 service")
struct ThumbnailerServiceTests {
  /// Signals as they were sent.
  enum Signal: Equatable, Sendable {
    case started(UInt32, String)
    case ready(UInt32, [String], String)
    case error(UInt32, [String], ThumbnailerService.ErrorCode, String)
    case finished(UInt32, String)
  }

  final class Signals: ThumbnailerSignals {
    let log = Recorder<Signal>()
    func started(_ handle: UInt32, to caller: String) { log.append(.started(handle, caller)) }
    func ready(_ handle: UInt32, uris: [String], to caller: String) {
      log.append(.ready(handle, uris, caller))
    }
    func error(
      _ handle: UInt32, uris: [String], code: ThumbnailerService.ErrorCode, message: String,
      to caller: String
    ) { log.append(.error(handle, uris, code, caller)) }
    func finished(_ handle: UInt32, to caller: String) { log.append(.finished(handle, caller)) }

    func of(_ handle: UInt32) -> [Signal] {
      log.values.filter {
        switch $0 {
        case .started(let h, _), .ready(let h, _, _), .error(let h, _, _, _), .finished(let h, _):
          h == handle
        }
      }
    }
  }

  /// Jobs that wait until the test opens their path; starts and cancellations recorded.
  final class GatedWork: Sendable {
    private struct State {
      var starts: [String] = []
      var open: Set<String> = []
      var waiting: [String: CheckedContinuation<Void, any Error>] = [:]
      var cancelled: [String] = []
    }
    private let state = Mutex(State())
    let answers: [String: ThumbnailerService.Answer]

    init(answers: [String: ThumbnailerService.Answer] = [:]) { self.answers = answers }

    var work: ThumbnailerService.Work {
      ThumbnailerService.Work(
        lookup: { path, _ in self.answers[path] },
        thumbnail: { path, _, _, _ in
          try await self.wait(path)
          return .made([:])
        })
    }

    private func wait(_ path: String) async throws {
      state.withLock { $0.starts.append(path) }
      try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
          let now = state.withLock { state -> Bool in
            if state.open.contains(path) { return true }
            state.waiting[path] = continuation
            return false
          }
          if now { continuation.resume() }
        }
      } onCancel: {
        let waiter = state.withLock { state in
          state.cancelled.append(path)
          return state.waiting.removeValue(forKey: path)
        }
        waiter?.resume(throwing: CancellationError())
      }
    }

    func open(_ path: String) {
      let waiter = state.withLock { state in
        state.open.insert(path)
        return state.waiting.removeValue(forKey: path)
      }
      waiter?.resume()
    }

    var starts: [String] { state.withLock { $0.starts } }
    var cancelled: [String] { state.withLock { $0.cancelled } }
  }

  static func uris(_ paths: [String]) -> [String] { paths.map { "file://" + $0 } }

  static func queue(
    _ service: ThumbnailerService, _ caller: String, _ paths: [String],
    scheduler: String = "default", flavor: String = "normal", unqueue: UInt32 = 0
  ) -> UInt32 {
    let handle = service.queue(
      caller: caller, uris: uris(paths), flavor: flavor, scheduler: scheduler, unqueue: unqueue)
    service.queued(handle)
    return handle
  }

  @Test(
    "cached, refused and remote URIs are answered at once, after Started; Finished waits for the rest"
  )
  func answeredAtOnce() async throws {
    let signals = Signals()
    let gated = GatedWork(answers: [
      "/p/cached.jpg": .ready, "/p/thumb.png": .error(.isThumbnail, "a thumbnail"),
    ])
    let service = ThumbnailerService(signals: signals, work: gated.work, window: 2)
    let handle = service.queue(
      caller: ":1.5",
      uris: [
        "file:///p/cached.jpg", "https://example.com/a.jpg", "file:///p/thumb.png",
        "file:///p/new.jpg",
      ],
      flavor: "large", scheduler: "default", unqueue: 0)
    #expect(signals.log.values.isEmpty, "nothing before the reply")
    service.queued(handle)
    await eventually("the new file starts") { gated.starts == ["/p/new.jpg"] }
    #expect(
      signals.of(handle) == [
        .started(handle, ":1.5"), .ready(handle, ["file:///p/cached.jpg"], ":1.5"),
        .error(handle, ["file:///p/thumb.png"], .isThumbnail, ":1.5"),
        .error(handle, ["https://example.com/a.jpg"], .unsupported, ":1.5"),
      ])
    gated.open("/p/new.jpg")
    await eventually("finished") { signals.of(handle).last == .finished(handle, ":1.5") }
    #expect(signals.of(handle).dropLast().last == .ready(handle, ["file:///p/new.jpg"], ":1.5"))
  }

  @Test("an unknown flavor is an error for every URI, with Started and Finished around it")
  func unknownFlavor() {
    let signals = Signals()
    let service = ThumbnailerService(signals: signals, work: GatedWork().work, window: 1)
    let handle = Self.queue(service, ":1.2", ["/a.jpg", "/b.jpg"], flavor: "huge")
    #expect(
      signals.of(handle) == [
        .started(handle, ":1.2"),
        .error(handle, Self.uris(["/a.jpg", "/b.jpg"]), .unsupportedFlavor, ":1.2"),
        .finished(handle, ":1.2"),
      ])
  }

  @Test(
    "foreground requests run newest first and background ones oldest first, each kind in a window of its own"
  )
  func schedule() async throws {
    let signals = Signals()
    let gated = GatedWork()
    let service = ThumbnailerService(signals: signals, work: gated.work, window: 1)
    _ = Self.queue(service, ":1.1", ["/a1", "/a2"], scheduler: "foreground")
    await eventually("a1 runs") { gated.starts == ["/a1"] }
    _ = Self.queue(service, ":1.1", ["/b1", "/b2"], scheduler: "default")
    _ = Self.queue(service, ":1.1", ["/c1"], scheduler: "background")
    _ = Self.queue(service, ":1.1", ["/d1"], scheduler: "background")
    await eventually("the oldest background job runs beside it") {
      gated.starts == ["/a1", "/c1"]
    }
    for (open, next) in [("/a1", "/b1"), ("/b1", "/b2"), ("/b2", "/a2"), ("/c1", "/d1")] {
      gated.open(open)
      await eventually("\(next) after \(open)") { gated.starts.last == next }
    }
    #expect(gated.starts == ["/a1", "/c1", "/b1", "/b2", "/a2", "/d1"])
    #expect(service.load.foreground == 1 && service.load.background == 1)
  }

  @Test(
    "Dequeue cancels the running jobs, starts no more and sends Finished; another caller's request finishes untouched, and a stranger cannot dequeue"
  )
  func dequeue() async throws {
    let signals = Signals()
    let gated = GatedWork()
    let service = ThumbnailerService(signals: signals, work: gated.work, window: 2)
    let paths = (0..<10).map { "/x\($0)" }
    let mine = Self.queue(service, ":1.1", paths)
    let theirs = Self.queue(service, ":1.2", ["/y0", "/y1", "/y2"], scheduler: "background")
    await eventually("two of each run") { gated.starts.count == 4 }
    service.dequeue(mine, caller: ":1.2")
    #expect(signals.of(mine) == [.started(mine, ":1.1")], "another caller's Dequeue is ignored")
    service.dequeue(mine, caller: ":1.1")
    #expect(signals.of(mine).last == .finished(mine, ":1.1"))
    await eventually("both running jobs cancelled") { Set(gated.cancelled) == ["/x0", "/x1"] }
    for path in ["/y0", "/y1", "/y2"] { gated.open(path) }
    await eventually("theirs finished") { signals.of(theirs).last == .finished(theirs, ":1.2") }
    #expect(signals.of(theirs).filter { if case .ready = $0 { true } else { false } }.count == 3)
    #expect(gated.starts.filter { $0.hasPrefix("/x") } == ["/x0", "/x1"], "no more of mine")
    #expect(signals.of(mine).count == 2, "nothing after Finished")
    #expect(service.load.requests == 0)
  }

  @Test("handle_to_unqueue ends the old request (Finished, running job cancelled) in the same call")
  func replace() async throws {
    let signals = Signals()
    let gated = GatedWork()
    let service = ThumbnailerService(signals: signals, work: gated.work, window: 1)
    let old = Self.queue(service, ":1.1", ["/o0", "/o1", "/o2"])
    await eventually("o0 runs") { gated.starts == ["/o0"] }
    let new = Self.queue(service, ":1.1", ["/n0"], unqueue: old)
    #expect(signals.of(old).last == .finished(old, ":1.1"))
    await eventually("n0 runs") { gated.starts == ["/o0", "/n0"] }
    #expect(gated.cancelled == ["/o0"])
    gated.open("/n0")
    await eventually("new finished") { signals.of(new).last == .finished(new, ":1.1") }
    #expect(!gated.starts.contains("/o1"))
  }

  @Test("a caller leaving the bus ends its requests without signals and cancels their jobs")
  func callerLeft() async throws {
    let signals = Signals()
    let gated = GatedWork()
    let service = ThumbnailerService(signals: signals, work: gated.work, window: 1)
    let handle = Self.queue(service, ":1.9", ["/g0", "/g1"])
    await eventually("g0 runs") { gated.starts == ["/g0"] }
    service.callerLeft(":1.9")
    await eventually("g0 cancelled") { gated.cancelled == ["/g0"] }
    #expect(signals.of(handle) == [.started(handle, ":1.9")])
    #expect(service.load.requests == 0 && gated.starts == ["/g0"])
  }

  @Test("past maxPending waiting URIs, a request is refused with 'other' instead of queued")
  func bounded() async throws {
    let signals = Signals()
    let gated = GatedWork()
    let service = ThumbnailerService(
      signals: signals, work: gated.work, window: 1, maxPending: 3)
    _ = Self.queue(service, ":1.1", ["/a", "/b", "/c"])
    await eventually("a runs, two wait") { gated.starts == ["/a"] }
    let refused = Self.queue(service, ":1.1", ["/e", "/f"])
    #expect(
      signals.of(refused) == [
        .started(refused, ":1.1"), .error(refused, Self.uris(["/e", "/f"]), .other, ":1.1"),
        .finished(refused, ":1.1"),
      ])
  }

  @Test("stop ends every request with Finished and starts nothing more")
  func stop() async throws {
    let signals = Signals()
    let gated = GatedWork()
    let service = ThumbnailerService(signals: signals, work: gated.work, window: 1)
    let handle = Self.queue(service, ":1.1", ["/a", "/b"])
    await eventually("a runs") { gated.starts == ["/a"] }
    service.stop()
    #expect(signals.of(handle).last == .finished(handle, ":1.1"))
    let late = Self.queue(service, ":1.1", ["/c"])
    #expect(signals.of(late).contains(.error(late, ["file:///c"], .shuttingDown, ":1.1")))
    #expect(gated.starts == ["/a"])
  }
}
