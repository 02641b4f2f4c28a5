import Foundation
import ImagePipeline
import Synchronization

/// The ImagePipeline library in this process, with the same slot rules as the daemon's
/// sessions: a load replaces the slot's binding and gives up the old task; a result is passed
/// on only if its binding is still the slot's.
public final class LibraryTarget: LoadTarget {
  /// The pipeline under test.
  public let pipeline: ThumbnailPipeline

  /// A pipeline that may fetch from loopback origins, with a memory cache of `memoryLimit`.
  public init(memoryLimit: Int = 64 << 20) {
    let policy = SourcePolicy(allowedNetworks: IPNetwork.loopback)
    pipeline = ThumbnailPipeline(
      configuration: .init(
        dataLoader: SourceLoader(policy: policy), memoryCacheCostLimit: memoryLimit))
  }

  /// `library`.
  public var name: String { "library" }

  private let clients = Atomic<UInt64>(0)

  /// A client with its own slot table and its own share of prefetch capacity.
  public func connect() throws -> any LoadClient {
    LibraryClient(pipeline: pipeline, client: ClientID(clients.add(1, ordering: .relaxed).newValue))
  }

  /// The pipeline's counters and this process's RSS.
  public func serverFigures() -> ServerFigures {
    let snapshot = pipeline.metrics.snapshot()
    var figures = ServerFigures()
    figures.cancelledWork = snapshot.cancelledWork
    figures.staleDrops = snapshot.staleDrops
    figures.decodes = snapshot.decodes
    figures.residentBytes = ResidentMemory.ofThisProcess()
    return figures
  }
}

/// One client's slots and rounds over an in-process pipeline.
final class LibraryClient: LoadClient {
  private struct Binding {
    let item: String
    let token: Int
    let generation: UInt64
    let task: ImageTask?
  }

  private struct State {
    var slots: [Int: Binding] = [:]
    var rounds: [Int: [ImageTask]] = [:]
    var generation: UInt64 = 0
    var closed = false
  }

  let events: AsyncStream<TargetEvent>
  private let continuation: AsyncStream<TargetEvent>.Continuation
  private let pipeline: ThumbnailPipeline
  private let client: ClientID
  private let state = Mutex(State())
  private let stale = Atomic<Int>(0)

  init(pipeline: ThumbnailPipeline, client: ClientID) {
    self.pipeline = pipeline
    self.client = client
    (events, continuation) = AsyncStream.makeStream(of: TargetEvent.self)
  }

  func load(slot: Int, item: String, token: Int, url: String, size: Int, visible: Bool) throws {
    let request = ImageRequest(url: url, spec: ThumbnailSpec(width: size, height: size))
    let task = pipeline.task(for: request, priority: visible ? .visible : .normal, client: client)
    let generation = state.withLock { state -> UInt64 in
      state.generation += 1
      state.slots[slot]?.task?.cancel()
      state.slots[slot] = Binding(
        item: item, token: token, generation: state.generation, task: task)
      return state.generation
    }
    Task { [self] in
      let outcome: Result<ImageResponse, PipelineError>
      do {
        outcome = .success(try await task.response)
      } catch let error as PipelineError {
        outcome = .failure(error)
      } catch {
        return
      }
      // The same check the daemon makes before writing a frame.
      let current = state.withLock { $0.slots[slot]?.generation == generation }
      guard current else {
        pipeline.metrics.countStaleDrop()
        return
      }
      switch outcome {
      case .success(let response):
        continuation.yield(
          .image(
            slot: slot, item: item, token: token, cache: response.source.rawValue,
            data: response.thumbnail.data))
      case .failure(let error):
        continuation.yield(.error(slot: slot, item: item, token: token, code: error.kind))
      }
    }
  }

  func cancel(slot: Int, token: Int) throws {
    state.withLock { state in
      guard let binding = state.slots[slot], binding.token == token else { return }
      binding.task?.cancel()
      state.slots[slot] = nil
    }
  }

  func prefetch(round: Int, items: [(item: String, url: String)], size: Int) throws {
    let spec = ThumbnailSpec(width: size, height: size)
    let tasks = items.map { entry in
      let task = pipeline.task(
        for: ImageRequest(url: entry.url, spec: spec), priority: .prefetch, client: client)
      let continuation = continuation
      Task {
        do {
          _ = try await task.response
          continuation.yield(.prefetched(round: round, item: entry.item))
        } catch let error as PipelineError {
          continuation.yield(.prefetchError(round: round, item: entry.item, code: error.kind))
        } catch {}
      }
      return task
    }
    state.withLock { $0.rounds[round, default: []] += tasks }
  }

  func release(round: Int) throws {
    let tasks = state.withLock { $0.rounds.removeValue(forKey: round) } ?? []
    for task in tasks { task.cancel() }
  }

  func isCurrent(slot: Int, item: String, token: Int) -> Bool {
    let current = state.withLock { state in
      state.slots[slot].map { $0.item == item && $0.token == token } ?? false
    }
    if !current { stale.add(1, ordering: .relaxed) }
    return current
  }

  var staleDropped: Int { stale.load(ordering: .relaxed) }

  func close() {
    let tasks = state.withLock { state -> [ImageTask] in
      defer {
        state.slots.removeAll()
        state.rounds.removeAll()
        state.closed = true
      }
      return state.slots.values.compactMap(\.task) + state.rounds.values.flatMap { $0 }
    }
    for task in tasks { task.cancel() }
    continuation.finish()
  }
}

/// Resident set size from /proc.
enum ResidentMemory {
  static func ofThisProcess() -> Int { of(path: "/proc/self/status") }

  static func of(path: String) -> Int {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    let kib = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    return kib * 1024
  }
}
