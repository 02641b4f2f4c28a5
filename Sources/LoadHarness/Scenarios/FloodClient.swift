import Foundation
import Synchronization

/// A client that keeps asking to prefetch items nobody will look at: low-priority load that
/// must not slow down what is visible. A new round of `count` items every half second, each
/// round released four rounds later.
///
/// It runs on a thread of its own rather than on the cooperative pool: building and sending
/// rounds of hundreds of items there would delay the measured lists' tasks, and the report
/// would charge the generator's own work to the server.
final class FloodClient: Sendable {
  private let client: any LoadClient
  private let stopped = Atomic<Bool>(false)
  private let finished = DispatchSemaphore(value: 0)
  private let drain: Task<Void, Never>

  init(client: any LoadClient, count: Int, origin: any ImageOrigin, measurements: Measurements) {
    self.client = client
    drain = Task {
      for await event in client.events {
        if case .prefetched = event { measurements.countFloodResult(ok: true) }
        if case .prefetchError = event { measurements.countFloodResult(ok: false) }
      }
    }
    let base = SyntheticOrigin.fillerItems
    Thread.detachNewThread { [self] in
      var round = 0
      while !stopped.load(ordering: .relaxed) {
        round += 1
        let items = (0..<count).map { index in
          let item = base + round * count + index
          return (item: String(item), url: origin.url(item: item))
        }
        if (try? client.prefetch(round: round, items: items, size: 128)) != nil {
          measurements.countFloodAnnounced(items.count)
        }
        usleep(500_000)
        if round > 4 { try? client.release(round: round - 4) }
      }
      finished.signal()
    }
  }

  /// Stops flooding, closes the client and waits for its last events.
  func stop() async {
    stopped.store(true, ordering: .relaxed)
    await withCheckedContinuation { continuation in
      Thread.detachNewThread { [finished] in
        finished.wait()
        continuation.resume()
      }
    }
    client.close()
    await drain.value
  }
}
