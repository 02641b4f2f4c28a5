/// One display place reused for many items: a list cell's stand-in.
///
/// The slot holds the item it currently shows and a token that changes on every `load` and
/// `clear`. A result is applied only if, when it arrives, the slot still holds the item and token
/// it was requested for; anything else is a stale result, dropped and counted. Loading a new
/// item cancels the previous subscription first, so work for an item nobody looks at any more
/// stops unless someone else still wants it. Nothing here is keyed by position.
public actor ImageSlot<ItemID: Hashable & Sendable, Value: Sendable> {
  /// Fetches the value for an item; it runs in a task the slot cancels on reuse.
  public typealias Loader = @Sendable (ItemID) async throws -> Value
  /// Shows a value (or a failure) for the item the slot holds. Called on the slot's actor.
  public typealias Presenter = @Sendable (ItemID, Result<Value, any Error>) -> Void

  /// The item the slot is showing or loading, if any.
  public private(set) var item: ItemID?
  /// Changes on every `load` and `clear`; a result carries the token it was requested with.
  public private(set) var token: UInt64 = 0
  /// Results (or failures) that arrived for an item or token the slot no longer holds.
  public private(set) var staleDrops = 0
  /// Results applied to the slot.
  public private(set) var applied = 0

  private let loader: Loader
  private let present: Presenter
  private let metrics: PipelineMetrics?
  private var current: Task<Void, Never>?

  /// Creates an empty slot. `metrics`, when given, counts stale drops pipeline-wide too.
  public init(
    loader: @escaping Loader, metrics: PipelineMetrics? = nil, present: @escaping Presenter
  ) {
    self.loader = loader
    self.present = present
    self.metrics = metrics
  }

  /// Starts showing `item`: cancels the previous load, takes a new token, subscribes anew.
  /// Returns the token this load carries.
  @discardableResult
  public func load(_ item: ItemID) -> UInt64 {
    current?.cancel()
    token &+= 1
    self.item = item
    let (token, loader) = (token, loader)
    current = Task {
      let result: Result<Value, any Error>
      do {
        result = .success(try await loader(item))
      } catch {
        result = .failure(error)
      }
      self.deliver(result, for: item, token: token)
    }
    return token
  }

  /// Empties the slot (the cell left the screen): cancels its load; later results are stale.
  public func clear() {
    current?.cancel()
    current = nil
    token &+= 1
    item = nil
  }

  private func deliver(_ result: Result<Value, any Error>, for item: ItemID, token: UInt64) {
    if case .failure(let error) = result, error is CancellationError { return }
    guard item == self.item, token == self.token else {
      staleDrops += 1
      metrics?.countStaleDrop()
      return
    }
    applied += 1
    current = nil
    present(item, result)
  }
}

extension ImageSlot where Value == ImageResponse {
  /// A slot fed by a pipeline: `request` maps an item to what to load, at `priority`.
  public init(
    pipeline: ThumbnailPipeline, priority: ImagePriority = .visible,
    request: @escaping @Sendable (ItemID) -> ImageRequest, present: @escaping Presenter
  ) {
    self.init(
      loader: { item in try await pipeline.response(for: request(item), priority: priority) },
      metrics: pipeline.metrics, present: present)
  }
}
