import Foundation
import ImagePipeline
import Synchronization
import Testing

/// A data loader whose fetches wait until the test opens their URL's gate. It records how often
/// each URL was fetched, in which order fetches started, and how many were cancelled.
final class GatedLoader: DataLoading {
  private struct Waiting {
    let url: String
    let continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var starts: [String] = []
    var open: Set<String> = []
    var waiting: [UInt64: Waiting] = [:]
    var cancelled = 0
    var nextID: UInt64 = 0
  }

  private let state = Mutex(State())
  private let bodies: @Sendable (String) -> [UInt8]

  init(bodies: @escaping @Sendable (String) -> [UInt8]) { self.bodies = bodies }

  func load(_ request: SourceRequest) async throws -> SourceResponse {
    let url = request.url
    let id = state.withLock { state -> UInt64 in
      state.starts.append(url)
      state.nextID += 1
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let openNow = state.withLock { state -> Bool in
          if state.open.contains(url) { return true }
          state.waiting[id] = Waiting(url: url, continuation: continuation)
          return false
        }
        if openNow { continuation.resume() }
      }
    } onCancel: {
      let waiter = state.withLock { state -> Waiting? in
        guard let waiter = state.waiting.removeValue(forKey: id) else { return nil }
        state.cancelled += 1
        return waiter
      }
      waiter?.continuation.resume(throwing: CancellationError())
    }
    return .modified(bodies(url), .unversioned())
  }

  /// Lets every present and future fetch of `url` complete.
  func open(_ url: String) {
    let released = state.withLock { state -> [Waiting] in
      state.open.insert(url)
      let matching = state.waiting.filter { $0.value.url == url }
      for key in matching.keys { state.waiting[key] = nil }
      return Array(matching.values)
    }
    for waiter in released { waiter.continuation.resume() }
  }

  /// Fetch starts, in order.
  var starts: [String] { state.withLock { $0.starts } }
  /// Fetches cancelled while waiting at their gate.
  var cancelled: Int { state.withLock { $0.cancelled } }
  /// Fetches currently waiting at a gate.
  var waitingCount: Int { state.withLock { $0.waiting.count } }
}
