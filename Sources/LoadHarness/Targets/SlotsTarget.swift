import ImagePipeline
import Synchronization

/// The ImagePipeline library as an app uses it without a session: each cell an `ImageSlot`,
/// each prefetch round a `PrefetchCoordinator` round. These are the library's app-facing
/// conveniences (the daemon's sessions use `SessionState` instead); this target is where
/// thumbload checks them under scrolling.
public final class SlotsTarget: LoadTarget {
  /// The pipeline under test.
  public let pipeline: ThumbnailPipeline

  /// A pipeline that may fetch from loopback origins, with a memory cache of `memoryLimit`.
  public init(memoryLimit: Int = 64 << 20) {
    pipeline = LibraryTarget.loopbackPipeline(memoryLimit: memoryLimit)
  }

  /// `library-slots`.
  public var name: String { "library-slots" }

  private let clients = Atomic<UInt64>(0)

  /// A client with its own slots and coordinator, and its own share of prefetch capacity.
  public func connect() throws -> any LoadClient {
    SlotsClient(pipeline: pipeline, client: ClientID(clients.add(1, ordering: .relaxed).newValue))
  }

  /// The pipeline's counters and this process's RSS.
  public func serverFigures() -> ServerFigures { LibraryTarget.figures(of: pipeline) }
}

/// One app's list: an `ImageSlot` per cell and a `PrefetchCoordinator` for its hints. The
/// `LoadClient` calls are synchronous and the slots are actors, so the calls go through one
/// ordered queue, as an app's main thread would make them. A slot's priority is fixed when it
/// is made, from its first load (`ImageSlot` has one priority).
final class SlotsClient: LoadClient {
  /// What a cell asks for; the harness's token is part of it, so a result for an older load of
  /// the same item is stale too.
  struct CellItem: Hashable, Sendable {
    let item: String
    let token: Int
    let url: String
    let spec: ValidSpec
  }

  /// What a prefetch round announces.
  struct HintItem: Hashable, Sendable {
    let item: String
    let url: String
    let spec: ValidSpec
  }

  private enum Command: Sendable {
    case load(slot: Int, CellItem, visible: Bool)
    case cancel(slot: Int, token: Int)
    case prefetch(round: Int, [HintItem])
    case release(round: Int)
  }

  /// Coordinator rounds and the harness's round numbers, both ways; outcomes that arrive
  /// before their round is recorded wait in `early`.
  private struct Rounds {
    var harness: [UInt64: Int] = [:]
    var coordinator: [Int: PrefetchCoordinator<HintItem>.Round] = [:]
    var early: [(UInt64, String, String?)] = []
  }

  let events: AsyncStream<TargetEvent>
  private let continuation: AsyncStream<TargetEvent>.Continuation
  private let commands: AsyncStream<Command>.Continuation
  private let shown = Mutex<[Int: CellItem]>([:])
  private let rounds = RoundTable()

  private final class RoundTable: Sendable {
    let state = Mutex(Rounds())
    func withLock<T>(_ body: (inout Rounds) -> T) -> T { state.withLock { body(&$0) } }
  }
  private let stale = Atomic<Int>(0)

  init(pipeline: ThumbnailPipeline, client: ClientID) {
    let (events, continuation) = AsyncStream.makeStream(of: TargetEvent.self)
    (self.events, self.continuation) = (events, continuation)
    let (queue, commands) = AsyncStream.makeStream(of: Command.self)
    self.commands = commands
    let rounds = rounds
    let observer: PrefetchCoordinator<HintItem>.Observer = { round, hint, result in
      // nil: prefetched; else the failure's kind.
      let failure: String? =
        switch result {
        case .success: nil
        case .failure(let error): (error as? PipelineError)?.kind ?? "internal"
        }
      let number = rounds.withLock { state -> Int? in
        guard let number = state.harness[round.id] else {
          state.early.append((round.id, hint.item, failure))
          return nil
        }
        return number
      }
      if let number { continuation.yield(Self.prefetchEvent(number, hint.item, failure)) }
    }
    let coordinator = PrefetchCoordinator<HintItem>(
      pipeline: pipeline, client: client,
      request: { ImageRequest(url: $0.url, spec: $0.spec) },
      observer: observer)
    Task {
      var slots: [Int: ImageSlot<CellItem, ImageResponse>] = [:]
      for await command in queue {
        switch command {
        case .load(let number, let cell, let visible):
          let slot =
            slots[number]
            ?? ImageSlot(
              pipeline: pipeline, priority: visible ? .visible : .normal,
              request: { ImageRequest(url: $0.url, spec: $0.spec) }
            ) { cell, result in
              switch result {
              case .success(let response):
                continuation.yield(
                  .image(
                    slot: number, item: cell.item, token: cell.token,
                    cache: response.source.rawValue, data: response.thumbnail.data))
              case .failure(let error):
                let code = (error as? PipelineError)?.kind ?? "internal"
                continuation.yield(
                  .error(slot: number, item: cell.item, token: cell.token, code: code))
              }
            }
          slots[number] = slot
          await slot.load(cell)
        case .cancel(let number, let token):
          guard let slot = slots[number], await slot.item?.token == token else { continue }
          await slot.clear()
        case .prefetch(let number, let hints):
          let round = await coordinator.prefetch(hints)
          let early = rounds.withLock { state -> [(String, String?)] in
            state.harness[round.id] = number
            state.coordinator[number] = round
            let mine = state.early.filter { $0.0 == round.id }
            state.early.removeAll { $0.0 == round.id }
            return mine.map { ($0.1, $0.2) }
          }
          for (item, failure) in early {
            continuation.yield(Self.prefetchEvent(number, item, failure))
          }
        case .release(let number):
          guard let round = rounds.withLock({ $0.coordinator.removeValue(forKey: number) }) else {
            continue
          }
          await coordinator.release(round)
          rounds.withLock { _ = $0.harness.removeValue(forKey: round.id) }
        }
      }
      for slot in slots.values { await slot.clear() }
      for round in rounds.withLock({ Array($0.coordinator.values) }) {
        await coordinator.release(round)
      }
      continuation.finish()
    }
  }

  /// What a cell or a hint asks the pipeline for: a square box of `size`, checked.
  private static func box(_ size: Int) throws -> ValidSpec {
    try ValidSpec(ThumbnailSpec(width: size, height: size))
  }

  private static func prefetchEvent(_ round: Int, _ item: String, _ failure: String?) -> TargetEvent
  {
    guard let failure else { return .prefetched(round: round, item: item) }
    return .prefetchError(round: round, item: item, code: failure)
  }

  func load(
    slot: Int, item: String, token: Int, url: String, size: Int, visible: Bool, preview: Bool
  ) throws {
    let cell = CellItem(item: item, token: token, url: url, spec: try Self.box(size))
    shown.withLock { $0[slot] = cell }
    commands.yield(.load(slot: slot, cell, visible: visible))
  }

  func cancel(slot: Int, token: Int) throws {
    shown.withLock { if $0[slot]?.token == token { $0[slot] = nil } }
    commands.yield(.cancel(slot: slot, token: token))
  }

  func prefetch(round: Int, items: [(item: String, url: String)], size: Int) throws {
    let spec = try Self.box(size)
    commands.yield(
      .prefetch(round: round, items.map { HintItem(item: $0.item, url: $0.url, spec: spec) }))
  }

  func release(round: Int) throws { commands.yield(.release(round: round)) }

  func isCurrent(slot: Int, item: String, token: Int) -> Bool {
    let current = shown.withLock { $0[slot].map { $0.item == item && $0.token == token } ?? false }
    if !current { stale.add(1, ordering: .relaxed) }
    return current
  }

  var staleDropped: Int { stale.load(ordering: .relaxed) }

  func close() { commands.finish() }
}
