import Synchronization

/// Early results of shared work, per key: consumers listen beside their subscription, the job
/// publishes at most once while it runs, and a listener that comes later gets what was
/// published. One mechanism for both stages: a download announces the first bytes a preview
/// can be made from, a thumbnail job announces its preview.
final class Announcements<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  typealias Listener = @Sendable (Value) -> Void

  private struct Entry {
    var listeners: [UInt64: Listener] = [:]
    var published: Value?
  }

  private let entries = Mutex<[Key: Entry]>([:])

  /// Calls `listener` with what the job for `key` publishes (at once, if it already has).
  func listen(_ key: Key, id: UInt64, _ listener: @escaping Listener) {
    let published = entries.withLock { entries in
      entries[key, default: Entry()].listeners[id] = listener
      return entries[key]?.published
    }
    if let published { listener(published) }
  }

  /// Stops calling `id`'s listener.
  func stopListening(_ key: Key, id: UInt64) {
    entries.withLock { entries in
      entries[key]?.listeners[id] = nil
      if entries[key]?.listeners.isEmpty == true { entries[key] = nil }
    }
  }

  /// Whether anyone listens for `key`.
  func wants(_ key: Key) -> Bool { entries.withLock { $0[key] != nil } }

  /// Hands `value` to every listener for `key`, in the caller's turn (listeners must not
  /// block). Called inside `PreviewTurn.whileOpen`, so never after the job ended.
  func publish(_ value: Value, for key: Key) {
    let listeners: [Listener] = entries.withLock { entries in
      guard entries[key] != nil else { return [] }
      entries[key]!.published = value
      return Array(entries[key]!.listeners.values)
    }
    for listener in listeners { listener(value) }
  }

  /// The job for `key` ended: what it published is not handed to later listeners.
  func forget(_ key: Key) {
    entries.withLock { entries in entries[key]?.published = nil }
  }
}

/// One job's right to publish a preview: taken once, and closed when the job ends, so no
/// preview is published after the job's result (the stage hands the result on only after the
/// job has returned, which closes the turn first).
final class PreviewTurn: Sendable {
  private let state = Mutex<(taken: Bool, closed: Bool)>((false, false))

  /// True for the first caller while the turn is open: that caller makes the preview.
  func take() -> Bool {
    state.withLock { state in
      guard !state.taken, !state.closed else { return false }
      state.taken = true
      return true
    }
  }

  /// Runs `body` unless the job has ended; `close` waits for it.
  func whileOpen(_ body: () -> Void) {
    state.withLock { state in
      guard !state.closed else { return }
      body()
    }
  }

  /// The job ended.
  func close() { state.withLock { $0.closed = true } }
}

/// Watches a download for the first bytes a preview can be made from (`PreviewPrefix`), on
/// the transport's thread, and hands a copy of them on once.
final class PreviewWatcher: BodyWatching {
  private let prefix = Mutex<PreviewPrefix>(PreviewPrefix())
  private let onReady: @Sendable ([UInt8]) -> Void

  /// `onReady` gets the first bytes once, on the transport's thread; it must not block.
  init(onReady: @escaping @Sendable ([UInt8]) -> Void) { self.onReady = onReady }

  func bodyStarted() { prefix.withLock { $0 = PreviewPrefix() } }

  func bodyGrew(_ body: UnsafeRawBufferPointer) -> Bool {
    switch prefix.withLock({ $0.look(at: body) }) {
    case .more: return true
    case .none: return false
    case .ready(let size):
      onReady(Array(UnsafeRawBufferPointer(rebasing: body[..<size])))
      return false
    }
  }
}

/// Whether any consumer waits with a preview listener. While any does, downloads are watched
/// and thumbnail jobs listen for their first bytes (a consumer that asks for a preview may join
/// a job a prefetch began); with none, previews cost nothing.
final class PreviewDemand: Sendable {
  private let consumers = Atomic<Int>(0)

  /// Whether some consumer now waits with a preview listener.
  var wanted: Bool { consumers.load(ordering: .relaxed) > 0 }

  /// A consumer with a listener came.
  func add() { consumers.add(1, ordering: .relaxed) }

  /// A consumer with a listener left.
  func remove() { consumers.subtract(1, ordering: .relaxed) }
}

/// Makes a thumbnail job's preview, on a decode thread at the job's priority, and hands it to
/// the consumers listening. Built once, by the pipeline, from the parts it uses.
struct PreviewMaker: Sendable {
  let thumbnailer: Thumbnailer
  let decoders: DecodeWorkers
  /// The memory a download's first bytes are held in meanwhile.
  let budget: MemoryBudget
  /// Where a job's preview is published to its consumers.
  let published: Announcements<ImageRequest, Thumbnail>
  let metrics: PipelineMetrics

  /// The spec a preview of `spec` is made at: the same box and fit, JPEG (PNG when
  /// transparent), quality 70: cheap to encode and shown by every client.
  static func previewSpec(_ spec: ThumbnailSpec) -> ThumbnailSpec {
    var preview = spec
    preview.format = .auto
    preview.quality = min(spec.quality, 70)
    return preview
  }

  /// Makes and publishes the job's preview of `request` from a download's first bytes, on a
  /// decode thread at the job's priority, while the rest arrives. The copy of the bytes is held
  /// in the budget meanwhile.
  func make(of bytes: [UInt8], for request: ImageRequest, _ context: JobContext) async {
    let memory = budget.hold(bytes.count)
    defer { memory.release() }
    _ = try? await decoders.run(context: context) { cancellation in
      publish(of: bytes, for: request, context, cancellation)
    }
  }

  /// On a decode thread: makes the job's preview of `request` from `bytes` (a download's first
  /// bytes, or the whole source) and hands it to the consumers listening, unless the job has
  /// one already or has ended. A source without an early picture publishes nothing.
  func publish(
    of bytes: [UInt8], for request: ImageRequest, _ context: JobContext,
    _ cancellation: CancellationFlag
  ) {
    guard context.previews.take(),
      let preview = try? thumbnailer.preview(
        .bytes(bytes), spec: ValidSpec(Self.previewSpec(request.spec.spec)),
        cancellation: cancellation)
    else { return }
    metrics.countPreview()
    context.previews.whileOpen { published.publish(preview, for: request) }
  }
}
