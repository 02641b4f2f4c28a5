/// Turns "these items are coming" hints into low-priority, shared, cancellable interest.
///
/// `prefetch(_:)` returns a round token and `release(_:)` gives that round's interest back. The
/// token is the only way back: positions move between a prefetch and its release, so release
/// never re-resolves positions. Interest is reference-counted per item across rounds; an item's
/// work starts when its first round asks and is cancelled when its last round releases it,
/// unless a visible consumer has joined it in the pipeline meanwhile. Prefetch work runs at
/// `.prefetch` priority in the same coalescing stages as visible loads, so a visible request for
/// a prefetched item raises the running work instead of starting a second one. It warms the
/// caches and never touches slots.
public actor PrefetchCoordinator<ItemID: Hashable & Sendable> {
  /// Identifies one `prefetch` call.
  public struct Round: Hashable, Sendable {
    /// The round number, unique per coordinator.
    public let id: UInt64
  }

  /// Called when an item's prefetch finishes, once for each round that still wants it.
  public typealias Observer = @Sendable (Round, ItemID, Result<ImageResponse, any Error>) -> Void

  private let pipeline: ThumbnailPipeline
  private let client: ClientID
  private let request: @Sendable (ItemID) -> ImageRequest
  private let observer: Observer?
  private var rounds: [Round: [ItemID]] = [:]
  private var interest: [ItemID: Int] = [:]
  private var tasks: [ItemID: ImageTask] = [:]
  private var nextRound: UInt64 = 0

  /// Creates a coordinator that maps items to requests with `request`; its work counts against
  /// `client`'s share of prefetch capacity.
  public init(
    pipeline: ThumbnailPipeline, client: ClientID = .shared,
    request: @escaping @Sendable (ItemID) -> ImageRequest, observer: Observer? = nil
  ) {
    self.pipeline = pipeline
    self.client = client
    self.request = request
    self.observer = observer
  }

  /// Registers interest in `items` and starts work for those nobody wanted yet.
  public func prefetch(_ items: [ItemID]) -> Round {
    nextRound += 1
    let round = Round(id: nextRound)
    let unique = Array(Set(items))
    rounds[round] = unique
    for item in unique {
      interest[item, default: 0] += 1
      if interest[item] == 1 { start(item) }
    }
    return round
  }

  /// Gives back a round's interest; items no round wants any more have their work cancelled.
  /// Unknown or already released rounds are ignored.
  public func release(_ round: Round) {
    guard let items = rounds.removeValue(forKey: round) else { return }
    for item in items {
      let remaining = (interest[item] ?? 1) - 1
      if remaining > 0 {
        interest[item] = remaining
      } else {
        interest[item] = nil
        tasks.removeValue(forKey: item)?.cancel()
      }
    }
  }

  /// Items some round still wants.
  public var interestedItems: Set<ItemID> { Set(interest.keys) }
  /// Rounds not yet released.
  public var openRounds: Int { rounds.count }

  private func start(_ item: ItemID) {
    let task = pipeline.task(for: request(item), priority: .prefetch, client: client)
    tasks[item] = task
    Task {
      let result: Result<ImageResponse, any Error>
      do {
        result = .success(try await task.response)
      } catch {
        result = .failure(error)
      }
      self.finished(item, task, result)
    }
  }

  private func finished(
    _ item: ItemID, _ task: ImageTask, _ result: Result<ImageResponse, any Error>
  ) {
    guard tasks[item] === task else { return }  // released (and maybe restarted) meanwhile
    tasks[item] = nil
    guard let observer else { return }
    for (round, items) in rounds where items.contains(item) { observer(round, item, result) }
  }
}
