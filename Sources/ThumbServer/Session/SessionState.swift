import ImagePipeline
import ThumbProtocol

/// One session's slots, prefetch rounds and announced items, as a pure state machine: a client
/// message in, effects out; a finished piece of work in, a message to send (or a drop) out. It
/// starts nothing itself, so the daemon's session handler and thumbload's library target run
/// the same rules (`SessionDriver` carries the effects out), and its tests need no sockets.
///
/// The rules (docs/PROTOCOL.md, section 2): a `load` replaces the slot's binding at once and
/// gives up the old work; a result is sent only if its slot still holds the binding it was
/// started for, compared by work number, so an older load of the same item and token never
/// passes; prefetch items wait in the session's own queue and at most `maxStartedPrefetches`
/// are in the pipeline; announced items are bounded in memory by `SessionMemory`.
struct SessionState {
  /// Names one piece of work (a load or a prefetch item), unique within the session.
  typealias WorkID = UInt64

  /// What a piece of work was started for; handed back with its outcome.
  enum Purpose: Sendable, Hashable {
    case load(slot: Int)
    case prefetch(round: Int, item: String)
  }

  /// How a piece of work ended, or (`placeholder`, `preview`) what is known of it before it
  /// ends.
  enum Outcome: Sendable {
    case success(ImageResponse)
    case failure(PipelineError)
    /// The load's rough look and final size, found in the placeholder index; the work goes on.
    case placeholder(thumbHash: [UInt8], colour: String, width: Int, height: Int)
    /// An early picture of the load's source; the work goes on.
    case preview(Thumbnail)

    /// Whether the work is over (a placeholder or preview comes before the end).
    var isFinal: Bool {
      switch self {
      case .placeholder, .preview: false
      case .success, .failure: true
      }
    }
  }

  /// What the owner must do, in order.
  enum Effect {
    /// Ask the pipeline for `request`; report its outcome with `work` and `purpose`, and (with
    /// `preview`) its preview first if it makes one.
    case start(
      work: WorkID, request: ImageRequest, priority: ImagePriority, purpose: Purpose,
      preview: Bool)
    /// Look for `request`'s placeholder; report it as a `placeholder` outcome of `work`.
    case findPlaceholder(work: WorkID, request: ImageRequest, purpose: Purpose)
    /// Give up the work's subscription.
    case cancel(work: WorkID)
    /// Raise or lower the work's priority.
    case setPriority(work: WorkID, priority: ImagePriority)
    /// Write a frame.
    case send(ServerMessage)
    /// A result came for a binding that has moved on: count it (`thumbd_stale_drops_total`).
    case staleDrop
  }

  /// Prefetch items a session has in the pipeline at once; the rest of its announced items
  /// wait in its own queue, where releasing them costs nothing and a flood of hints from one
  /// session does not become thousands of tasks. Above `prefetch_concurrency`, so a session
  /// can use every place while some of its items finish as memory or disk hits.
  static let maxStartedPrefetches = 32

  /// A slot's current load. Its work number stands for item, token and rev together: a
  /// result is delivered only for the work this binding started, so no older load's picture
  /// (another item, an older token, an older rev) ever reaches the slot.
  private struct Binding {
    let item: String
    let token: Int
    let rev: String?
    let work: WorkID
    /// False once answered (the slot keeps showing the item).
    var pending: Bool
    /// True once a preview went out: a load gets at most one.
    var previewed = false
  }

  private struct Entry {
    let work: WorkID
    let request: ImageRequest
    /// Bytes counted against `SessionMemory`.
    let cost: Int
    var started = false
  }

  private let parameters: ThumbnailParameters
  private let memory: SessionMemory
  /// Bytes of this session's entries, counted in `memory`.
  private var held = 0
  private var slots: [Int: Binding] = [:]
  private var rounds: [Int: [String: Entry]] = [:]
  /// Announced items not started yet, in the order announced; released ones are skipped.
  private var queue: [(round: Int, item: String, work: WorkID)] = []
  private var queueHead = 0
  private var startedPrefetches = 0
  private var lastWork: WorkID = 0

  /// A session with the daemon's defaults, sharing `memory` with every other session.
  init(parameters: ThumbnailParameters, memory: SessionMemory) {
    self.parameters = parameters
    self.memory = memory
  }

  /// Loads and prefetch items not answered yet.
  var pendingWork: Int {
    slots.values.count(where: \.pending) + rounds.values.reduce(0) { $0 + $1.count }
  }

  /// Applies one client message. One that breaks a session bound (a round still open, too many
  /// rounds) is answered, and the session goes on.
  mutating func apply(_ message: ClientMessage) -> [Effect] {
    switch message {
    case .load(let load):
      return start(load)
    case .cancel(let slot, let token):
      guard let binding = slots[slot], binding.token == token else { return [] }
      slots[slot] = nil
      return binding.pending ? [.cancel(work: binding.work)] : []
    case .priority(let slot, let token, let priority):
      guard let binding = slots[slot], binding.token == token, binding.pending else { return [] }
      return [.setPriority(work: binding.work, priority: ImagePriority(priority))]
    case .prefetch(let prefetch):
      return start(prefetch)
    case .release(let round):
      return release(round)
    }
  }

  /// A message that broke a rule (`refused`, for `why`): answered where it points. A `load`
  /// whose slot reads moves the slot on as any load does (the old load's interest ends, and
  /// nothing of it is delivered), so the slot's answer is this error; other messages change
  /// nothing.
  mutating func refuse(_ refused: RefusedMessage, because why: String) -> [Effect] {
    var effects: [Effect] = []
    if refused.op == Wire.Op.load.rawValue, let slot = refused.slot,
      let old = slots.removeValue(forKey: slot), old.pending
    {
      effects.append(.cancel(work: old.work))
    }
    effects.append(.send(refused.reply(why)))
    return effects
  }

  /// A piece of work ended: the message to send, or a drop when its binding has moved on.
  mutating func finished(_ work: WorkID, _ purpose: Purpose, _ outcome: Outcome) -> [Effect] {
    switch purpose {
    case .load(let slot):
      if case .preview(let preview) = outcome {
        // As a placeholder: for its own binding only, before the image, and once.
        guard var binding = slots[slot], binding.work == work, binding.pending,
          !binding.previewed
        else { return [] }
        binding.previewed = true
        slots[slot] = binding
        return [
          .send(
            .preview(
              ServerMessage.Image(
                slot: slot, item: binding.item, token: binding.token,
                format: preview.format.rawValue, width: preview.width, height: preview.height,
                cache: "", data: preview.data, rev: binding.rev)))
        ]
      }
      if case .placeholder(let hash, let colour, let width, let height) = outcome {
        // The images' rule: only for the binding it was looked up for, and only before its
        // image (never after it).
        guard let binding = slots[slot], binding.work == work, binding.pending else { return [] }
        return [
          .send(
            .placeholder(
              ServerMessage.Placeholder(
                slot: slot, item: binding.item, token: binding.token, rev: binding.rev,
                thumbHash: hash, colour: colour, width: width, height: height)))
        ]
      }
      guard var binding = slots[slot], binding.work == work, binding.pending else {
        return [.staleDrop]
      }
      binding.pending = false
      slots[slot] = binding
      switch outcome {
      case .success(let response):
        let thumbnail = response.thumbnail
        return [
          .send(
            .image(
              ServerMessage.Image(
                slot: slot, item: binding.item, token: binding.token,
                format: thumbnail.format.rawValue, width: thumbnail.width,
                height: thumbnail.height, cache: response.source.rawValue, data: thumbnail.data,
                rev: binding.rev)))
        ]
      case .failure(let error):
        return [
          .send(
            .error(
              slot: slot, item: binding.item, token: binding.token, code: error.kind,
              message: error.message))
        ]
      case .placeholder, .preview:
        return []
      }
    case .prefetch(let round, let item):
      guard outcome.isFinal, let entry = rounds[round]?[item], entry.work == work else {
        return []
      }
      give(entry.cost)
      rounds[round]![item] = nil
      if rounds[round]!.isEmpty { rounds[round] = nil }
      startedPrefetches -= 1
      var effects = startQueued()
      switch outcome {
      case .success: effects.append(.send(.prefetched(round: round, item: item)))
      case .failure(let error):
        effects.append(.send(.prefetchError(round: round, item: item, code: error.kind)))
      case .placeholder, .preview: break
      }
      return effects
    }
  }

  /// The connection closed: every piece of work is given up.
  mutating func close() -> [Effect] {
    var effects: [Effect] = slots.values.filter(\.pending).map { .cancel(work: $0.work) }
    for round in rounds.values {
      for entry in round.values where entry.started { effects.append(.cancel(work: entry.work)) }
    }
    slots.removeAll()
    rounds.removeAll()
    give(held)
    queue.removeAll()
    queueHead = 0
    startedPrefetches = 0
    return effects
  }

  private mutating func nextWork() -> WorkID {
    lastWork += 1
    return lastWork
  }

  private mutating func start(_ load: ClientMessage.Load) -> [Effect] {
    // The slot moves on whatever happens next: the old load's interest ends here.
    var effects: [Effect] = []
    if let old = slots.removeValue(forKey: load.slot), old.pending {
      effects.append(.cancel(work: old.work))
    }
    let work = nextWork()
    switch parameters.spec(load.box) {
    case .failure(let error):
      effects.append(
        .send(
          .error(
            slot: load.slot, item: load.item, token: load.token, code: Wire.Code.invalidSpec,
            message: error.message)))
    case .success(let spec):
      slots[load.slot] = Binding(
        item: load.item, token: load.token, rev: load.rev, work: work, pending: true)
      let request = ImageRequest(url: load.url, spec: spec, rev: load.rev)
      effects.append(
        .start(
          work: work, request: request, priority: ImagePriority(load.priority),
          purpose: .load(slot: load.slot), preview: load.preview))
      // Found in memory, the placeholder goes out with this message's answers, before the
      // work (which reports on a later turn) can deliver anything.
      effects.append(
        .findPlaceholder(work: work, request: request, purpose: .load(slot: load.slot)))
    }
    return effects
  }

  private mutating func start(_ prefetch: ClientMessage.Prefetch) -> [Effect] {
    guard rounds[prefetch.round] == nil else {
      // The open round's items go on; this message is answered alone.
      return refuse(
        RefusedMessage(op: Wire.Op.prefetch.rawValue, round: prefetch.round),
        because: "still open: release it or use another number")
    }
    guard rounds.count < Wire.maxOpenRounds else {
      // Over a session bound, as an item over the memory bound is: told, not queued.
      return Set(prefetch.items.map(\.item)).sorted().map {
        .send(.prefetchError(round: prefetch.round, item: $0, code: Wire.Code.busy))
      }
    }
    let spec: ValidSpec
    switch parameters.spec(prefetch.box) {
    case .success(let checked): spec = checked
    case .failure:
      return prefetch.items.map {
        .send(.prefetchError(round: prefetch.round, item: $0.item, code: Wire.Code.invalidSpec))
      }
    }
    var entries: [String: Entry] = [:]
    var refused: [Effect] = []
    for entry in prefetch.items where entries[entry.item] == nil {
      let cost = SessionMemory.cost(item: entry.item, url: entry.url, rev: entry.rev)
      guard memory.take(cost, holding: held) else {
        // Over this session's or every session's bound: told, not queued.
        refused.append(
          .send(.prefetchError(round: prefetch.round, item: entry.item, code: Wire.Code.busy)))
        continue
      }
      held += cost
      let work = nextWork()
      entries[entry.item] = Entry(
        work: work, request: ImageRequest(url: entry.url, spec: spec, rev: entry.rev), cost: cost)
      queue.append((prefetch.round, entry.item, work))
    }
    if !entries.isEmpty { rounds[prefetch.round] = entries }
    return startQueued() + refused
  }

  private mutating func release(_ round: Int) -> [Effect] {
    guard let entries = rounds.removeValue(forKey: round)?.values else { return [] }
    // Newest first: the oldest hold the prefetch places (admission is first come, first
    // served within a session), so by the time one of them gives its place up, every item of
    // the round still waiting for one is already marked as unwanted.
    let started = entries.filter(\.started).sorted { $0.work > $1.work }
    startedPrefetches -= started.count
    give(entries.reduce(0) { $0 + $1.cost })
    // The round's items still waiting go at once, not when the queue reaches them.
    if started.count < entries.count {
      queue.removeSubrange(0..<queueHead)
      queueHead = 0
      queue.removeAll { $0.round == round }
    }
    return started.map { .cancel(work: $0.work) } + startQueued()
  }

  private mutating func give(_ bytes: Int) {
    held -= bytes
    memory.give(bytes)
  }

  /// Starts queued prefetch items, oldest first, while fewer than `maxStartedPrefetches` run.
  private mutating func startQueued() -> [Effect] {
    var effects: [Effect] = []
    while startedPrefetches < Self.maxStartedPrefetches && queueHead < queue.count {
      let (round, item, work) = queue[queueHead]
      queueHead += 1
      guard var entry = rounds[round]?[item], entry.work == work, !entry.started else {
        continue  // released meanwhile
      }
      entry.started = true
      rounds[round]![item] = entry
      startedPrefetches += 1
      effects.append(
        .start(
          work: work, request: entry.request, priority: .prefetch,
          purpose: .prefetch(round: round, item: item), preview: false))
    }
    // Reclaim the consumed part of the queue once it is half of it.
    if queueHead * 2 >= queue.count {
      queue.removeFirst(queueHead)
      queueHead = 0
    }
    return effects
  }
}

extension ImagePriority {
  /// The pipeline's priority for the protocol's.
  init(_ priority: ThumbProtocol.Priority) {
    switch priority {
    case .visible: self = .visible
    case .normal: self = .normal
    case .prefetch: self = .prefetch
    }
  }
}
