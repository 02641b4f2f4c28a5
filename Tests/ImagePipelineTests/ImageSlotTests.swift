import ImagePipeline
import Synchronization
import Testing
import ThumbSystem

@testable import TestSupport

/// A loader whose calls complete only when the test says, in any order, and which ignores
/// cancellation: a result can still arrive after its slot moved on, as late network replies do.
final class ManualLoader: Sendable {
  private struct Call {
    let item: Int
    let sequence: Int
    let continuation: CheckedContinuation<String, Never>
  }
  private let state = Mutex<(pending: [Call], calls: Int)>(([], 0))

  func load(_ item: Int) async -> String {
    await withCheckedContinuation { continuation in
      state.withLock { state in
        state.pending.append(Call(item: item, sequence: state.calls, continuation: continuation))
        state.calls += 1
      }
    }
  }

  /// Calls not yet completed.
  var count: Int { state.withLock { $0.pending.count } }
  /// Calls made so far.
  var calls: Int { state.withLock { $0.calls } }

  /// Completes the pending call at `index` with a value naming its item and call number, and
  /// returns that call number.
  @discardableResult
  func complete(at index: Int) -> Int {
    let call = state.withLock { $0.pending.remove(at: index) }
    call.continuation.resume(returning: "image of \(call.item) from call \(call.sequence)")
    return call.sequence
  }
}

@Suite("Image slots")
struct ImageSlotTests {
  @Test("10,000 randomised slot histories never show a superseded item")
  func randomisedHistories() async throws {
    var generator = SeededRandom(seed: 7)
    for history in 0..<10_000 {
      let loader = ManualLoader()
      let shown = Recorder<(item: Int, value: String)>()
      let slot = ImageSlot<Int, String>(
        loader: { await loader.load($0) },
        present: { item, result in
          if case .success(let value) = result { shown.append((item, value)) }
        })
      // Load 2-5 items (drawn from three, so one item is often reloaded and only the token
      // tells the loads apart) before anything completes.
      let loads = Int.random(in: 2...5, using: &generator)
      var last = 0
      for step in 0..<loads {
        last = history * 10 + Int.random(in: 0..<3, using: &generator)
        await slot.load(last)
        await eventually("load reached the loader") { loader.calls == step + 1 }
      }
      // Complete a random subset, in random order.
      let arriving = Int.random(in: 1...loads, using: &generator)
      var lastArrived = false
      for _ in 0..<arriving {
        let call = loader.complete(at: Int.random(in: 0..<loader.count, using: &generator))
        if call == loads - 1 { lastArrived = true }
      }
      await eventually("every arrival handled") {
        await slot.staleDrops + slot.applied == arriving
      }
      let displayed = shown.values
      let expected = "image of \(last) from call \(loads - 1)"
      #expect(displayed.allSatisfy { $0.item == last && $0.value == expected })
      #expect(displayed.count == (lastArrived ? 1 : 0))
      #expect(await slot.staleDrops == arriving - (lastArrived ? 1 : 0))
      // Release the rest so no continuation leaks.
      while loader.count > 0 { loader.complete(at: 0) }
    }
  }

  @Test("a cleared slot applies nothing, and the item and token both have to match")
  func clearAndSameItemReload() async throws {
    let loader = ManualLoader()
    let shown = Recorder<Int>()
    let slot = ImageSlot<Int, String>(
      loader: { await loader.load($0) }, present: { item, _ in shown.append(item) })
    let first = await slot.load(1)
    let second = await slot.load(1)  // same item again: a new token
    #expect(second != first)
    await eventually("two calls") { loader.count == 2 }
    loader.complete(at: 0)  // the first request for item 1: stale by token
    await eventually("handled") { await slot.staleDrops == 1 }
    await slot.clear()
    loader.complete(at: 0)
    await eventually("handled") { await slot.staleDrops == 2 }
    #expect(shown.values.isEmpty)
  }

  @Test("a pipeline slot counts stale drops in the pipeline metrics")
  func pipelineSlot() async throws {
    let photo = try Corpus.bytes("photo/coil/normal.jpg")
    let loader = GatedLoader { _ in photo }
    let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: loader))
    let shown = Recorder<Int>()
    let slot = ImageSlot<Int, ImageResponse>(
      pipeline: pipeline,
      request: {
        ImageRequest(url: "origin/\($0).jpg", spec: .known(ThumbnailSpec(width: 32, height: 32)))
      },
      present: { item, result in
        if case .success = result { shown.append(item) }
      })
    await slot.load(1)
    await eventually("first fetch waiting") { loader.waitingCount == 1 }
    await slot.load(2)
    await eventually("first fetch cancelled") { loader.cancelled == 1 }
    loader.open("origin/2.jpg")
    await eventually("shown") { shown.values == [2] }
    #expect(pipeline.metrics.snapshot().cancelledWork >= 1)
  }
}
