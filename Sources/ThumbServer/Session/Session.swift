import ImagePipeline
import ThumbClient

/// A finished piece of session work, on its way back to the event loop. It names the binding
/// it was started for by generation, so the loop can tell whether the slot still wants it.
enum SessionResult: Sendable {
  case load(slot: Int, generation: UInt64, Result<ImageResponse, PipelineError>)
  case prefetch(round: Int, item: String, generation: UInt64, Result<ImageResponse, PipelineError>)
}

/// One upgraded connection's slots and prefetch rounds. Owned by the event loop thread: frames
/// are applied in the order they arrive, and results are checked against the slot's current
/// binding at the last moment, on that same thread, just before they are written. A result for
/// a binding that a newer `load` or a `cancel` replaced is dropped and counted.
final class Session {
  private struct Binding {
    let item: String
    let token: Int
    let generation: UInt64
    /// The load's subscription; nil once delivered (the slot keeps showing the item).
    var task: ImageTask?
  }

  private struct PrefetchEntry {
    let generation: UInt64
    let request: ImageRequest
    /// Bytes counted against `SessionMemory`.
    let cost: Int
    /// Nil while the item waits in `prefetchQueue`.
    var task: ImageTask?
  }

  /// Prefetch items a session has in the pipeline at once; the rest of its announced items
  /// wait in its own queue, where releasing them costs nothing and a flood of hints from one
  /// session does not become thousands of tasks. Above `prefetch_concurrency`, so a session
  /// can use every place while some of its items finish as memory or disk hits.
  static let maxStartedPrefetches = 32

  /// Prefetch rounds with work still pending, per session.
  static let maxOpenRounds = 256

  private let pipeline: ThumbnailPipeline
  /// This session's share of prefetch capacity.
  private let client: ClientID
  private let parameters: ThumbnailParameters
  private let post: @Sendable (SessionResult) -> Void
  private let logger: Logger?
  private let memory: SessionMemory
  /// Bytes of this session's prefetch entries, counted in `memory`.
  private var held = 0
  private var reader = SessionFrameReader(maxBodyBytes: 65536)
  private var slots: [Int: Binding] = [:]
  private var rounds: [Int: [String: PrefetchEntry]] = [:]
  /// Announced items not started yet, in the order announced; released ones are skipped.
  private var prefetchQueue: [(round: Int, item: String, generation: UInt64)] = []
  private var prefetchQueueHead = 0
  private var startedPrefetches = 0
  private var nextGeneration: UInt64 = 0

  init(
    pipeline: ThumbnailPipeline, client: ClientID, parameters: ThumbnailParameters,
    logger: Logger?, memory: SessionMemory = SessionMemory(),
    post: @escaping @Sendable (SessionResult) -> Void
  ) {
    self.memory = memory
    self.pipeline = pipeline
    self.client = client
    self.parameters = parameters
    self.logger = logger
    self.post = post
  }

  /// Whether a frame is partly received (a stalled one is closed by the header timeout).
  var hasPartialFrame: Bool { reader.bufferedBytes > 0 }

  /// Loads and prefetches not yet answered.
  var pendingWork: Int {
    slots.values.count { $0.task != nil } + rounds.values.reduce(0) { $0 + $1.count }
  }

  /// Applies received bytes; returns frames to send at once (errors for invalid parameters).
  /// Throws for a malformed frame: the caller answers `bad_frame` and closes.
  func receive(_ bytes: some Collection<UInt8>) throws(SessionFrameError) -> [UInt8] {
    var output: [UInt8] = []
    for frame in try reader.feed(bytes) {
      switch try ClientRequest.parse(frame, parameters: parameters) {
      case .load(let load): output += start(load)
      case .cancel(let slot, let token):
        if let binding = slots[slot], binding.token == token {
          binding.task?.cancel()
          slots[slot] = nil
        }
      case .priority(let slot, let token, let priority):
        if let binding = slots[slot], binding.token == token { binding.task?.setPriority(priority) }
      case .prefetch(let prefetch): output += try start(prefetch)
      case .release(let round):
        // Newest first: the oldest hold the prefetch places (admission is first come, first
        // served within a session), so by the time one of them gives its place up, every
        // item of the round still waiting for one is already marked as unwanted.
        let entries = rounds.removeValue(forKey: round)?.values ?? [:].values
        let started = entries.filter { $0.task != nil }.sorted { $0.generation > $1.generation }
        for entry in started { entry.task?.cancel() }
        startedPrefetches -= started.count
        release(entries.reduce(0) { $0 + $1.cost })
        // The round's items still waiting go at once, not when the queue reaches them.
        if started.count < entries.count {
          prefetchQueue.removeSubrange(0..<prefetchQueueHead)
          prefetchQueueHead = 0
          prefetchQueue.removeAll { $0.round == round }
        }
        startPrefetches()
      }
    }
    return output
  }

  /// The frame to write for a finished result, or nil when its binding is gone.
  func resolve(_ result: SessionResult) -> [UInt8]? {
    switch result {
    case .load(let slot, let generation, let outcome):
      guard var binding = slots[slot], binding.generation == generation, binding.task != nil else {
        pipeline.metrics.countStaleDrop()
        return nil
      }
      binding.task = nil
      slots[slot] = binding
      var header: [String: JSONValue] = [
        "slot": .integer(slot), "item": .string(binding.item), "token": .integer(binding.token),
      ]
      switch outcome {
      case .success(let response):
        let thumbnail = response.thumbnail
        header["op"] = .string("image")
        header["format"] = .string(thumbnail.format.rawValue)
        header["width"] = .integer(thumbnail.width)
        header["height"] = .integer(thumbnail.height)
        header["cache"] = .string(response.source.rawValue)
        return SessionFrame(header: header, body: thumbnail.data).serialized()
      case .failure(let error):
        header["op"] = .string("error")
        header["code"] = .string(error.kind)
        header["message"] = .string(error.message)
        return SessionFrame(header: header).serialized()
      }
    case .prefetch(let round, let item, let generation, let outcome):
      guard let entry = rounds[round]?[item], entry.generation == generation else { return nil }
      release(entry.cost)
      rounds[round]![item] = nil
      if rounds[round]!.isEmpty { rounds[round] = nil }
      startedPrefetches -= 1
      startPrefetches()
      switch outcome {
      case .success:
        return SessionFrame(
          header: ["op": .string("prefetched"), "round": .integer(round), "item": .string(item)]
        ).serialized()
      case .failure(let error):
        return SessionFrame(
          header: [
            "op": .string("prefetch_error"), "round": .integer(round), "item": .string(item),
            "code": .string(error.kind),
          ]
        ).serialized()
      }
    }
  }

  /// The connection closed: every subscription of this session leaves.
  func close() {
    for binding in slots.values { binding.task?.cancel() }
    for round in rounds.values { for entry in round.values { entry.task?.cancel() } }
    slots.removeAll()
    release(held)
    rounds.removeAll()
    prefetchQueue.removeAll()
    prefetchQueueHead = 0
    startedPrefetches = 0
  }

  private func start(_ load: ClientRequest.Load) -> [UInt8] {
    // The slot moves on whatever happens next: the old load's interest ends here.
    slots.removeValue(forKey: load.slot)?.task?.cancel()
    nextGeneration += 1
    let generation = nextGeneration
    let spec: ThumbnailSpec
    switch load.spec {
    case .success(let checked): spec = checked
    case .failure(let error):
      return SessionFrame(header: [
        "op": .string("error"), "slot": .integer(load.slot), "item": .string(load.item),
        "token": .integer(load.token), "code": .string("invalid_spec"),
        "message": .string(error.message),
      ]).serialized()
    }
    let task = pipeline.task(
      for: ImageRequest(url: load.url, spec: spec), priority: load.priority, client: client)
    slots[load.slot] = Binding(
      item: load.item, token: load.token, generation: generation, task: task)
    let (post, slot) = (post, load.slot)
    Task {
      do {
        post(.load(slot: slot, generation: generation, .success(try await task.response)))
      } catch let error as PipelineError {
        post(.load(slot: slot, generation: generation, .failure(error)))
      } catch {
        // Cancelled: the binding is already gone.
      }
    }
    logger?.log(
      .debug, "session_load",
      [
        "slot": String(load.slot), "token": String(load.token),
        "src": LogRedaction.source(load.url),
      ]
    )
    return []
  }

  private func start(_ prefetch: ClientRequest.Prefetch) throws(SessionFrameError) -> [UInt8] {
    guard rounds[prefetch.round] == nil else {
      throw SessionFrameError("prefetch round \(prefetch.round) is still open")
    }
    guard rounds.count < Self.maxOpenRounds else {
      throw SessionFrameError("more than \(Self.maxOpenRounds) prefetch rounds open")
    }
    let spec: ThumbnailSpec
    switch prefetch.spec {
    case .success(let checked): spec = checked
    case .failure:
      return prefetch.items.flatMap { entry in
        SessionFrame(header: [
          "op": .string("prefetch_error"), "round": .integer(prefetch.round),
          "item": .string(entry.item), "code": .string("invalid_spec"),
        ]).serialized()
      }
    }
    var entries: [String: PrefetchEntry] = [:]
    var refused: [UInt8] = []
    for (item, url) in prefetch.items where entries[item] == nil {
      let cost = SessionMemory.cost(item: item, url: url)
      guard memory.take(cost, holding: held) else {
        // Over this session's or every session's bound: told, not queued.
        refused += SessionFrame(header: [
          "op": .string("prefetch_error"), "round": .integer(prefetch.round),
          "item": .string(item), "code": .string("busy"),
        ]).serialized()
        continue
      }
      held += cost
      nextGeneration += 1
      entries[item] = PrefetchEntry(
        generation: nextGeneration, request: ImageRequest(url: url, spec: spec), cost: cost)
      prefetchQueue.append((prefetch.round, item, nextGeneration))
    }
    if !entries.isEmpty { rounds[prefetch.round] = entries }
    startPrefetches()
    return refused
  }

  private func release(_ bytes: Int) {
    held -= bytes
    memory.give(bytes)
  }

  /// Starts queued prefetch items, oldest first, while fewer than `maxStartedPrefetches` run.
  private func startPrefetches() {
    while startedPrefetches < Self.maxStartedPrefetches && prefetchQueueHead < prefetchQueue.count {
      let (round, item, generation) = prefetchQueue[prefetchQueueHead]
      prefetchQueueHead += 1
      guard var entry = rounds[round]?[item], entry.generation == generation, entry.task == nil
      else { continue }  // released meanwhile
      let task = pipeline.task(for: entry.request, priority: .prefetch, client: client)
      entry.task = task
      rounds[round]![item] = entry
      startedPrefetches += 1
      let post = post
      Task {
        do {
          let response = try await task.response
          post(.prefetch(round: round, item: item, generation: generation, .success(response)))
        } catch let error as PipelineError {
          post(.prefetch(round: round, item: item, generation: generation, .failure(error)))
        } catch {
          // Released.
        }
      }
    }
    // Reclaim the consumed part of the queue once it is half of it.
    if prefetchQueueHead * 2 >= prefetchQueue.count {
      prefetchQueue.removeFirst(prefetchQueueHead)
      prefetchQueueHead = 0
    }
  }
}
