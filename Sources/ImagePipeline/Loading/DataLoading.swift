import Synchronization

/// Fetches the encoded bytes of a source with their version, or learns that the version the
/// caller holds is still current. Implementations must honour task cancellation: the
/// pipeline cancels a fetch when its last subscriber leaves.
public protocol DataLoading: Sendable {
  /// The source's bytes and version; `.notModified` only when `request.cached` is given and
  /// still names the current content.
  func load(_ request: SourceRequest) async throws -> SourceResponse

  /// The validator of what `url` holds, if the loader can tell without loading it (a `stat`
  /// for files), or nil: as it was at some moment after `notBefore` (the arrival of the
  /// request that asks), so a check made since for another request may be reused. Called on
  /// every request, memory hits included, so it must be cheap and must not block on the
  /// network.
  func currentValidator(of url: String, notBefore: ContinuousClock.Instant) -> SourceValidator?
}

extension DataLoading {
  /// Loaders that cannot check cheaply check nothing.
  public func currentValidator(of url: String, notBefore: ContinuousClock.Instant)
    -> SourceValidator?
  { nil }

  /// The whole body of `url`, or a `FetchError`.
  public func loadData(for url: String) async throws -> [UInt8] {
    switch try await load(SourceRequest(url: url)) {
    case .modified(let bytes, _): return bytes
    case .notModified: throw FetchError.badResponse("not modified, though nothing was cached")
    }
  }
}

/// One load: a URL and, for a revalidation, the validator of the copy the caller holds.
/// Equality and hashing ignore the meter and the watcher.
public struct SourceRequest: Sendable, Hashable {
  /// The source URL.
  public var url: String
  /// The validator of the cached copy: http sources send it as `If-None-Match` and
  /// `If-Modified-Since`, files compare it with their `fstat`.
  public var cached: SourceValidator?
  /// Told about body bytes as the loader takes them in (and gives them back when it drops
  /// them, as on a redirect), so the pipeline's memory budget sees a download grow.
  public var meter: ByteMeter?
  /// Shown the body as it grows (http sources), so a preview can be made from its first
  /// bytes before the rest arrives.
  public var watcher: (any BodyWatching)?
  /// `url` parsed, when the caller has it already: a loader then parses nothing again. Must
  /// be `url`'s own parse (`SourceURL(url)`).
  public var parsed: SourceURL?

  /// Creates a request.
  public init(
    url: String, cached: SourceValidator? = nil, meter: ByteMeter? = nil,
    watcher: (any BodyWatching)? = nil, parsed: SourceURL? = nil
  ) {
    self.url = url
    self.cached = cached
    self.meter = meter
    self.watcher = watcher
    self.parsed = parsed
  }

  /// Same URL and validator (the meter and watcher are not part of what is asked).
  public static func == (a: SourceRequest, b: SourceRequest) -> Bool {
    a.url == b.url && a.cached == b.cached
  }

  /// Hashes the URL and validator.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(url)
    hasher.combine(cached)
  }
}

/// Looks at a body while it arrives (see `SourceRequest.watcher`). Called on the loader's
/// thread: it must not block.
public protocol BodyWatching: AnyObject, Sendable {
  /// A body begins (again, after a redirect or a retry: what came before is gone).
  func bodyStarted()
  /// The body so far, grown by a chunk; false once the watcher has seen enough.
  func bodyGrew(_ body: UnsafeRawBufferPointer) -> Bool
}

/// Counts the bytes a load holds as they arrive (see `SourceRequest.meter`), and says how many
/// are held for it: a loader that knows a body's size before taking it in (a file's, or a
/// response's `Content-Length`) makes room for all of it first, so the budget is never
/// passed by a body larger than what was set aside.
public final class ByteMeter: Sendable {
  private let onCount: @Sendable (Int) -> Void
  private let onWiden: (@Sendable (Int) async throws -> Void)?
  private let held: Atomic<Int>

  /// A meter that reports each change (positive as bytes arrive, negative as they are
  /// dropped) to `onCount`, on the loader's thread: it must not block. `room` bytes are held
  /// for the body now; `widen` waits until a body of the given size is held (and throws when
  /// it never can be). Without `widen`, any body fits.
  public init(
    room: Int = .max, widen: (@Sendable (Int) async throws -> Void)? = nil,
    _ onCount: @escaping @Sendable (Int) -> Void
  ) {
    self.onCount = onCount
    onWiden = widen
    held = Atomic(widen == nil ? .max : max(0, room))
  }

  /// Reports `delta` bytes taken in (or, negative, dropped).
  public func count(_ delta: Int) { if delta != 0 { onCount(delta) } }

  /// Whether a body of `bytes` fits what is held for it; if not, `widen(to:)` before taking it.
  public func fits(_ bytes: Int) -> Bool { bytes <= held.load(ordering: .relaxed) }

  /// Waits until `bytes` are held for the body. Call it with nothing of the body taken in:
  /// what was held may be given back while it waits.
  public func widen(to bytes: Int) async throws {
    guard let onWiden, !fits(bytes) else { return }
    try await onWiden(bytes)
    held.store(bytes, ordering: .relaxed)
  }
}

/// What a load found.
public enum SourceResponse: Sendable {
  /// New bytes, and their version.
  case modified([UInt8], SourceVersion)
  /// The cached copy is current; the version carries the renewed freshness (and any
  /// validator the answer updated).
  case notModified(SourceVersion)
}
