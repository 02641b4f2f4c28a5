import ImagePipeline
import Synchronization

/// The freedesktop `Thumbnailer1` service without the bus: requests (a caller's list of URIs
/// in one flavor, under a handle), their schedule, and the signals each one gets.
///
/// - URIs already valid in the cache, refused ones (not `file://`, in the thumbnail cache, not
///   a regular file) and unknown flavors are answered at once, in `queued`.
/// - The rest run as `DesktopJobs`, a bounded window at a time: foreground requests (the
///   `foreground` and `default` schedulers: what is on screen) newest request first at visible
///   priority, background requests oldest first at prefetch priority, each kind in a window of
///   its own. A caller's wish for a file is one subscription to the job for it, so two callers
///   share one decode and one leaving never stops the other's.
/// - `Dequeue`, a `handle_to_unqueue` and a caller leaving the bus drop that request's URIs
///   not started and cancel its running subscriptions: at most one window of decodes runs on
///   after it, and stops at the decoder's next check unless another caller wants it.
///
/// Signals are sent with the service's lock held, so each request's come in order (`Started`,
/// then `Ready` and `Error`, then `Finished`); a `ThumbnailerSignals` must not block or call
/// back.
package final class ThumbnailerService: Sendable {
  /// tumbler's error codes (`TumblerErrorEnum`), which clients such as Thunar know.
  package enum ErrorCode: Int32, Sendable {
    /// No thumbnailer for this URI: a remote scheme, a format thumbd does not read, a file
    /// over the size or pixel limits.
    case unsupported = 0
    /// The file cannot be read: missing, not permitted, not a regular file.
    case connection = 1
    /// The file is damaged, or a failure entry says this version of it cannot be read.
    case invalidFormat = 2
    /// The file is itself a thumbnail.
    case isThumbnail = 3
    /// The thumbnail could not be written.
    case saveFailed = 4
    /// A flavor the cache does not have.
    case unsupportedFlavor = 5
    /// The file is empty.
    case noContent = 6
    /// The service is stopping.
    case shuttingDown = 7
    /// Anything else (the service is too busy).
    case other = 8
  }

  /// What a request's work is done with: the cache to look in at once, and the jobs.
  package struct Work: Sendable {
    /// The answer for a file that needs no decode, if there is one: a valid entry, a failure
    /// entry, or a refusal; nil when it must be thumbnailed.
    package let lookup: @Sendable (_ path: String, FreedesktopCache.Flavor) -> Answer?
    /// Thumbnails a file said to be of a MIME type (see `DesktopJobs.thumbnail`).
    package let thumbnail:
      @Sendable (_ path: String, FreedesktopCache.Flavor, ImagePriority, _ mediaType: String?)
        async throws -> DesktopThumbnailer.Outcome

    /// Work from its two parts (tests pass gated fakes).
    package init(
      lookup: @escaping @Sendable (String, FreedesktopCache.Flavor) -> Answer?,
      thumbnail:
        @escaping @Sendable (String, FreedesktopCache.Flavor, ImagePriority, String?)
        async throws -> DesktopThumbnailer.Outcome
    ) {
      self.lookup = lookup
      self.thumbnail = thumbnail
    }

    /// Work on `jobs`: the lookup asks their cache without decoding.
    package init(jobs: DesktopJobs) {
      let thumbnailer = jobs.thumbnailer
      self.init(
        lookup: { path, flavor in ThumbnailerService.answer(path, flavor, thumbnailer) },
        thumbnail: { path, flavor, priority, mediaType in
          try await jobs.thumbnail(
            path: path, flavor: flavor, priority: priority, mediaType: mediaType)
        })
    }
  }

  /// How one URI ends.
  package enum Answer: Sendable, Hashable {
    case ready
    case error(ErrorCode, String)
  }

  /// Most URIs waiting over all requests; a request past it is answered with `other`.
  package let maxPending: Int
  /// Jobs running at once per kind (foreground, background).
  package let window: Int
  private let signals: any ThumbnailerSignals
  private let work: Work
  private let state = Mutex(State())

  private struct Item: Sendable {
    let uri: String
    let path: String
    /// The MIME type the caller gave, if it gave one.
    let mediaType: String?
  }

  private struct Request {
    let caller: String
    let flavor: FreedesktopCache.Flavor?
    let foreground: Bool
    let sequence: UInt64
    var uris: [String]
    var mediaTypes: [String]
    var pending: [Item] = []
    var next = 0
    var running: [UInt64: Task<Void, Never>] = [:]
    var isStaged = true
  }

  private struct State {
    var requests: [UInt32: Request] = [:]
    var lastHandle: UInt32 = 0
    var sequence: UInt64 = 0
    var jobIDs: UInt64 = 0
    var running = [false: 0, true: 0]
    var pendingCount = 0
    var stopped = false
  }

  /// A service sending its signals to `signals`. `window` jobs of each kind run at once (the
  /// decode threads, so a dequeue stops at most that many).
  package init(
    signals: any ThumbnailerSignals, work: Work, window: Int, maxPending: Int = 200_000
  ) {
    self.signals = signals
    self.work = work
    self.window = max(1, window)
    self.maxPending = maxPending
  }

  /// The flavors a request may name.
  package static let flavors = FreedesktopCache.Flavor.allCases.map(\.rawValue)

  // MARK: - Calls

  /// `Queue`: takes the request and returns its handle (never 0). `handle_to_unqueue`, when it
  /// is one of `caller`'s, is dequeued first. Nothing is sent until `queued(handle)`.
  package func queue(
    caller: String, uris: [String], mediaTypes: [String] = [], flavor: String, scheduler: String,
    unqueue: UInt32
  ) -> UInt32 {
    state.withLock { state in
      if unqueue != 0 { dequeue(unqueue, caller: caller, &state) }
      repeat {
        state.lastHandle &+= 1
      } while state.lastHandle == 0
        || state.requests[state.lastHandle] != nil
      state.sequence += 1
      state.requests[state.lastHandle] = Request(
        caller: caller, flavor: FreedesktopCache.Flavor(rawValue: flavor),
        foreground: scheduler != "background", sequence: state.sequence, uris: uris,
        mediaTypes: mediaTypes.count == uris.count ? mediaTypes : [])
      return state.lastHandle
    }
  }

  /// After `Queue`'s reply: answers what needs no decode (`Started`, then `Ready` and `Error`
  /// for those URIs, and `Finished` when nothing is left) and schedules the rest. Does file
  /// I/O (`stat`, entry heads): call it on the bus thread, not the cooperative pool.
  package func queued(_ handle: UInt32) {
    guard let staged = state.withLock({ $0.requests[handle] }), staged.isStaged else { return }
    var ready: [String] = []
    var errors: [Answer: [String]] = [:]
    var pending: [Item] = []
    if let flavor = staged.flavor {
      for (index, uri) in staged.uris.enumerated() {
        let mediaType = index < staged.mediaTypes.count ? staged.mediaTypes[index] : nil
        guard let path = FreedesktopCache.localPath(ofURI: uri) else {
          errors[Self.localOnly, default: []].append(uri)
          continue
        }
        switch work.lookup(path, flavor) {
        case .ready?: ready.append(uri)
        case .error(let code, let message)?:
          errors[.error(code, message), default: []].append(uri)
        case nil: pending.append(Item(uri: uri, path: path, mediaType: mediaType))
        }
      }
    } else {
      errors[.error(.unsupportedFlavor, "Unsupported thumbnail flavor requested")] = staged.uris
    }
    state.withLock { state in
      guard var request = state.requests[handle], request.isStaged else { return }
      if state.pendingCount + pending.count > maxPending || state.stopped {
        let answer =
          state.stopped
          ? Answer.error(.shuttingDown, "The thumbnailer service is shutting down")
          : Answer.error(.other, "thumbd has \(state.pendingCount) files waiting already")
        errors[answer, default: []] += pending.map(\.uri)
        pending = []
      }
      signals.started(handle, to: request.caller)
      if !ready.isEmpty { signals.ready(handle, uris: ready, to: request.caller) }
      for (answer, uris) in errors.sorted(by: { $0.value[0] < $1.value[0] }) {
        if case .error(let code, let message) = answer {
          signals.error(handle, uris: uris, code: code, message: message, to: request.caller)
        }
      }
      request.isStaged = false
      request.uris = []
      request.mediaTypes = []
      request.pending = pending
      state.pendingCount += pending.count
      state.requests[handle] = request
      if pending.isEmpty { finish(handle, &state) }
    }
    pump()
  }

  /// `Dequeue`: ends `caller`'s request `handle` (another caller's handle is ignored).
  package func dequeue(_ handle: UInt32, caller: String) {
    state.withLock { state in dequeue(handle, caller: caller, &state) }
    pump()
  }

  /// A caller left the bus: its requests end without signals.
  package func callerLeft(_ caller: String) {
    state.withLock { state in
      for (handle, request) in state.requests where request.caller == caller {
        drop(handle, &state)
      }
    }
    pump()
  }

  /// Ends every request (with `Finished`) and starts no more work.
  package func stop() {
    state.withLock { state in
      state.stopped = true
      for handle in Array(state.requests.keys) { dequeue(handle, caller: nil, &state) }
    }
  }

  /// Requests not finished, and jobs running (foreground, background).
  package var load: (requests: Int, foreground: Int, background: Int) {
    state.withLock { ($0.requests.count, $0.running[true] ?? 0, $0.running[false] ?? 0) }
  }

  // MARK: - Scheduling

  private func dequeue(_ handle: UInt32, caller: String?, _ state: inout State) {
    guard let request = state.requests[handle], caller == nil || request.caller == caller else {
      return
    }
    if request.isStaged { signals.started(handle, to: request.caller) }
    drop(handle, &state)
    signals.finished(handle, to: request.caller)
  }

  /// Forgets a request: its waiting URIs, and its running subscriptions (cancelled).
  private func drop(_ handle: UInt32, _ state: inout State) {
    guard let request = state.requests.removeValue(forKey: handle) else { return }
    state.pendingCount -= request.pending.count - request.next
    for task in request.running.values { task.cancel() }
  }

  private func finish(_ handle: UInt32, _ state: inout State) {
    guard let request = state.requests[handle], request.next == request.pending.count,
      request.running.isEmpty
    else { return }
    state.requests[handle] = nil
    signals.finished(handle, to: request.caller)
  }

  /// Starts jobs while a window has room: the newest foreground request first, then the
  /// oldest background one.
  private func pump() {
    state.withLock { state in
      guard !state.stopped else { return }
      for foreground in [true, false] {
        while state.running[foreground, default: 0] < window {
          let candidates = state.requests.filter {
            $0.value.foreground == foreground && !$0.value.isStaged
              && $0.value.next < $0.value.pending.count
          }
          let chosen =
            foreground
            ? candidates.max { $0.value.sequence < $1.value.sequence }
            : candidates.min { $0.value.sequence < $1.value.sequence }
          guard let (handle, _) = chosen else { break }
          start(handle, &state)
        }
      }
    }
  }

  private func start(_ handle: UInt32, _ state: inout State) {
    guard var request = state.requests[handle], let flavor = request.flavor else { return }
    let item = request.pending[request.next]
    request.next += 1
    state.pendingCount -= 1
    state.jobIDs += 1
    let id = state.jobIDs
    let foreground = request.foreground
    state.running[foreground, default: 0] += 1
    let priority: ImagePriority = foreground ? .visible : .prefetch
    // The task takes the lock first thing, so it cannot finish before it is recorded here.
    request.running[id] = Task { [work] in
      let result: Result<DesktopThumbnailer.Outcome, any Error>
      do {
        result = .success(try await work.thumbnail(item.path, flavor, priority, item.mediaType))
      } catch {
        result = .failure(error)
      }
      self.completed(handle, id, item.uri, foreground, result)
    }
    state.requests[handle] = request
  }

  private func completed(
    _ handle: UInt32, _ id: UInt64, _ uri: String, _ foreground: Bool,
    _ result: Result<DesktopThumbnailer.Outcome, any Error>
  ) {
    state.withLock { state in
      state.running[foreground, default: 1] -= 1
      guard var request = state.requests[handle], request.running.removeValue(forKey: id) != nil
      else { return }
      state.requests[handle] = request
      switch Self.answer(result) {
      case .ready: signals.ready(handle, uris: [uri], to: request.caller)
      case .error(let code, let message):
        signals.error(handle, uris: [uri], code: code, message: message, to: request.caller)
      }
      finish(handle, &state)
    }
    pump()
  }

  // MARK: - Answers

  /// The answer for a URI that is not a local `file://` one.
  static let localOnly = Answer.error(.unsupported, "Only local files are supported")

  /// What the cache says of `path` in `flavor` without decoding: valid, failed before, in
  /// the thumbnail cache; nil when it must be made.
  static func answer(
    _ path: String, _ flavor: FreedesktopCache.Flavor, _ thumbnailer: DesktopThumbnailer
  ) -> Answer? {
    let cache = thumbnailer.cache
    if cache.holds(path) { return .error(.isThumbnail, "The file is a thumbnail itself") }
    guard let source = FreedesktopCache.source(atPath: path) else { return nil }
    switch cache.lookup(source, flavor: flavor) {
    case .thumbnail: return .ready
    case .failed: return failedBefore
    case .missing: return nil
    }
  }

  private static let failedBefore = Answer.error(
    .invalidFormat, "thumbd could not read this version of the file before (a failure entry)")

  /// A job's result as a signal.
  static func answer(_ result: Result<DesktopThumbnailer.Outcome, any Error>) -> Answer {
    switch result {
    case .failure(let error as PipelineError):
      return .error(.other, "\(error)")
    case .failure:
      return .error(.shuttingDown, "The thumbnailer service is shutting down")
    case .success(.made), .success(.cached): return .ready
    case .success(.failedBefore): return failedBefore
    case .success(.refused(let kind, let message)):
      let code: ErrorCode =
        switch kind {
        case "not_allowed": .isThumbnail
        case "truncated": .noContent
        case "unsupported_format", "source_too_large": .unsupported
        case ThumbnailError.cancelled.kind: .shuttingDown
        default: .connection
        }
      return .error(code, message)
    case .success(.failed(let error)):
      switch error {
      case .io: return .error(.saveFailed, error.message)
      case .tooLarge, .unsupportedFormat: return .error(.unsupported, error.message)
      default: return .error(.invalidFormat, error.message)
      }
    }
  }
}

/// Where `ThumbnailerService` sends its signals (the bus, unicast to `caller`). Called with the
/// service's lock held: must not block or call back into the service.
package protocol ThumbnailerSignals: Sendable {
  /// Work on `handle` has begun.
  func started(_ handle: UInt32, to caller: String)
  /// These URIs' thumbnails are in the cache.
  func ready(_ handle: UInt32, uris: [String], to caller: String)
  /// These URIs cannot be thumbnailed, for `message`.
  func error(
    _ handle: UInt32, uris: [String], code: ThumbnailerService.ErrorCode, message: String,
    to caller: String)
  /// Nothing more will be sent for `handle`.
  func finished(_ handle: UInt32, to caller: String)
}
