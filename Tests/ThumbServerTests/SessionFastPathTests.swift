import ImagePipeline
import Synchronization
import Testing
import ThumbProtocol

@testable import TestSupport
@testable import ThumbServer

/// A session `load` over a real pipeline: a memory hit is answered in the same step as the
/// frame that asked for it, on the owner's context, with no task; a miss reports once.
@Suite("Session load path")
struct SessionFastPathTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  /// Finished work reported by the pipeline, handed to whoever waits for it.
  final class Reports: Sendable {
    private let state = Mutex<
      (done: [FinishedWork], waiter: CheckedContinuation<FinishedWork, Never>?)
    >(
      ([], nil))

    func add(_ work: FinishedWork) {
      let waiter = state.withLock { state -> CheckedContinuation<FinishedWork, Never>? in
        guard let waiter = state.waiter else {
          state.done.append(work)
          return nil
        }
        state.waiter = nil
        return waiter
      }
      waiter?.resume(returning: work)
    }

    func next() async -> FinishedWork {
      await withCheckedContinuation { continuation in
        let ready = state.withLock { state -> FinishedWork? in
          guard state.done.isEmpty else { return state.done.removeFirst() }
          state.waiter = continuation
          return nil
        }
        if let ready { continuation.resume(returning: ready) }
      }
    }

    var count: Int { state.withLock { $0.done.count } }
  }

  static func load(_ slot: Int, token: Int) -> ClientMessage {
    .load(
      .init(
        slot: slot, item: "a", token: token, url: "https://img.example/a.jpg",
        box: .init(width: 64, height: 64)))
  }

  static func images(_ messages: [ServerMessage]) -> [(slot: Int, token: Int)] {
    messages.compactMap {
      guard case .image(let image) = $0 else { return nil }
      return (image.slot, image.token)
    }
  }

  @Test("a memory hit comes back with the load's own step; a miss comes back once, reported")
  func memoryHitAnsweredAtOnce() async throws {
    let loader = CountingLoader(["https://img.example/a.jpg": Self.photo])
    let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: loader))
    let reports = Reports()
    let driver = SessionDriver(
      pipeline: pipeline, client: ClientID(1), parameters: ThumbnailParameters(),
      memory: SessionMemory(), report: { reports.add($0) })
    // A miss: nothing at once, then one report, which becomes the image.
    #expect(driver.apply(Self.load(0, token: 1)).isEmpty)
    let first = await reports.next()
    #expect(Self.images(driver.finished(first)).map(\.slot) == [0])
    // The same thumbnail for another slot is in memory now: its image is among the messages
    // of the load itself, and no work was started for it.
    let hit = driver.apply(Self.load(1, token: 2))
    #expect(Self.images(hit).map(\.slot) == [1])
    #expect(Self.images(hit).map(\.token) == [2])
    #expect(driver.pendingWork == 0)
    #expect(reports.count == 0)
    #expect(loader.urls == ["https://img.example/a.jpg"])
  }
}
