import Synchronization
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// The rules of an http(s) fetch, whatever moves the bytes: the policy before every hop, one
/// name lookup per attempt whose addresses are checked and handed to the transport (which
/// checks them again at connect), the byte cap while the body streams in, redirects followed
/// here hop by hop (their bodies never read), one deadline over all hops, retries and
/// backoffs, and the mapping of every failure to a `FetchError`.
final class HTTPFetcher: Sendable {
  let policy: SourcePolicy
  let limits: FetchLimits
  let freshness: FreshnessRules
  let transport: any HTTPTransport
  let resolver: any NameResolving
  let counters: FetchCounters
  /// Told about body bytes as they arrive (see `SourceRequest.meter`).
  let meter: ByteMeter?
  /// Shown the body as it grows (see `SourceRequest.watcher`).
  let watcher: (any BodyWatching)?

  init(
    policy: SourcePolicy, limits: FetchLimits, freshness: FreshnessRules,
    transport: any HTTPTransport, resolver: any NameResolving, counters: FetchCounters,
    meter: ByteMeter? = nil, watcher: (any BodyWatching)? = nil
  ) {
    self.meter = meter
    self.watcher = watcher
    self.policy = policy
    self.limits = limits
    self.freshness = freshness
    self.transport = transport
    self.resolver = resolver
    self.counters = counters
  }

  /// What one attempt came back with.
  private enum Answer {
    case body([UInt8], Received)
    case notModified(Received)
    case redirect(String)
  }

  /// An attempt stopped at its head: the body's declared size is more than the memory held
  /// for it.
  private struct NeedsRoom: Error {
    let bytes: Int
  }

  /// Times one hop waits for room for its body before a body is taken as it comes.
  static let maxWidenings = 3

  /// A final response head and when it came.
  struct Received {
    let head: ResponseHead
    let requestTime: Double
    let responseTime: Double
  }

  /// The body and version of `url`, following redirects; with `cached` validators, a
  /// conditional request (on every hop), which a 304 answers without a body.
  func fetch(_ url: SourceURL, cached: SourceValidator? = nil) async throws -> SourceResponse {
    let deadline = ContinuousClock.now + .milliseconds(Int64(limits.totalTimeout * 1000))
    var current = url
    var redirects = 0
    let conditions = Self.conditions(cached)
    while true {
      try policy.check(current)
      switch try await fetchRetrying(current, conditions, deadline: deadline) {
      case .body(let bytes, let received):
        return .modified(bytes, version(of: received, digest: ContentDigest.of(bytes)))
      case .notModified(let received):
        return .notModified(version(of: received, digest: 0))
      case .redirect(let location):
        redirects += 1
        guard redirects <= limits.maxRedirects else {
          throw FetchError.tooManyRedirects(limits.maxRedirects)
        }
        counters.redirects.add(1, ordering: .relaxed)
        current = try current.resolving(location)
        // An origin may send its client elsewhere on the web, never into the machine's files.
        guard current.scheme == "http" || current.scheme == "https" else {
          throw FetchError.notAllowed(
            "a redirect may lead only to http or https, not \(current.scheme)")
        }
      }
    }
  }

  /// The version a response head describes: its validators, freshness by the rules.
  private func version(of received: Received, digest: UInt64) -> SourceVersion {
    func kept(_ name: String) -> String? {
      received.head.value(name).flatMap {
        $0.utf8.count <= SourceVersionCoding.maxValidatorBytes ? $0 : nil
      }
    }
    let modified = kept("last-modified")
    return SourceVersion(
      validator: .http(etag: kept("etag"), lastModified: modified), digest: digest,
      freshness: freshness.freshness(
        of: received.head, requestTime: received.requestTime,
        responseTime: received.responseTime),
      lastModified: modified.flatMap(HTTPDate.parse))
  }

  /// `If-None-Match` and `If-Modified-Since` for a cached copy's validators (RFC 9110,
  /// section 13.1: a recipient uses the entity tag first, so both may be sent).
  static func conditions(_ cached: SourceValidator?) -> [(name: String, value: String)] {
    guard case .http(let etag, let modified) = cached else { return [] }
    var headers: [(name: String, value: String)] = []
    if let etag { headers.append(("If-None-Match", etag)) }
    if let modified { headers.append(("If-Modified-Since", modified)) }
    return headers
  }

  /// One hop, tried again after failures the origin may recover from, with exponential
  /// backoff and equal jitter (half the delay fixed, half random; or its `Retry-After`), all
  /// inside `deadline`.
  ///
  /// A body larger than the memory held for it (`ByteMeter.fits`, by its `Content-Length`)
  /// is not taken: the exchange stops at its head, the meter waits until the whole body is
  /// held, and the hop is asked again, its deadline moved by the wait. Only
  /// `maxWidenings` times: a source that keeps growing is then counted as it arrives.
  private func fetchRetrying(
    _ url: SourceURL, _ conditions: [(name: String, value: String)],
    deadline: ContinuousClock.Instant
  ) async throws -> Answer {
    var attempt = 0
    var deadline = deadline
    var widenings = 0
    while true {
      let failure: Failure
      do {
        return try await self.attempt(
          url, conditions, deadline: deadline, askingRoom: widenings < Self.maxWidenings)
      } catch let needs as NeedsRoom {
        let waited = ContinuousClock.now
        try await meter?.widen(to: needs.bytes)
        deadline += waited.duration(to: .now)
        widenings += 1
        continue
      } catch let caught as Failure {
        failure = caught
      }
      guard failure.retryable, attempt < limits.retries else { throw failure.error }
      let delay =
        failure.retryAfter
        ?? limits.retryBackoff * Double(1 << min(attempt, 16)) * Double.random(in: 0.5...1)
      let remaining = ContinuousClock.now.duration(to: deadline).seconds
      // Waiting past the deadline only to fail then: answer now.
      guard delay < remaining else { throw failure.error }
      attempt += 1
      counters.retries.add(1, ordering: .relaxed)
      try await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
    }
  }

  /// A failed attempt: the error to report, and whether (and when) to try again.
  private struct Failure: Error {
    let error: FetchError
    var retryable = false
    var retryAfter: Double?
  }

  private func attempt(
    _ url: SourceURL, _ conditions: [(name: String, value: String)],
    deadline: ContinuousClock.Instant, askingRoom: Bool
  ) async throws -> Answer {
    func remaining() -> Double { ContinuousClock.now.duration(to: deadline).seconds }
    guard remaining() > 0 else {
      throw Failure(error: .timedOut("the fetch took longer than \(limits.totalTimeout) s"))
    }
    let headDeadline =
      ContinuousClock.now
      + .milliseconds(
        Int64(min(limits.connectTimeout, remaining()) * 1000))
    var addresses: [IPAddress] = []
    if let literal = url.hostAddress {
      guard policy.allows(literal) else {
        throw Failure(error: .notAllowed("\(url.host) is not an allowed address"))
      }
    } else {
      do {
        addresses = try await resolver.addresses(
          of: url.host, timeout: ContinuousClock.now.duration(to: headDeadline).seconds)
      } catch let error as FetchError {
        // A lookup that timed out or failed is not retried: the next answer is no sooner.
        throw Failure(error: error)
      }
      do throws(FetchError) {
        try policy.check(addresses, of: url.host)
      } catch {
        throw Failure(error: error)
      }
    }
    let collector = BodyCollector(
      limit: limits.maxSourceBytes, meter: meter, watcher: watcher, askingRoom: askingRoom)
    let policy = self.policy
    let requestTime = WallClock.now()
    let request = TransportRequest(
      url: url, headers: [("Accept", Self.accept)] + conditions, addresses: addresses,
      allowAddress: { policy.allows($0) },
      headTimeout: max(0.001, ContinuousClock.now.duration(to: headDeadline).seconds),
      totalTimeout: max(0.001, remaining()), maxBodyBytes: limits.maxSourceBytes)
    let end = await exchange(request, collector)
    switch end {
    case .complete:
      guard let head = collector.head else { throw Failure(error: .badResponse("no head")) }
      return .body(
        collector.takeBytes(),
        Received(head: head, requestTime: requestTime, responseTime: collector.headTime))
    case .cancelled:
      throw CancellationError()
    case .stopped:
      switch collector.stopReason {
      case .redirect(let location):
        return .redirect(location)
      case .needsRoom(let bytes):
        throw NeedsRoom(bytes: bytes)
      case .notModified:
        guard let head = collector.head, !conditions.isEmpty else {
          throw Failure(error: .httpStatus(304))
        }
        return .notModified(
          Received(head: head, requestTime: requestTime, responseTime: collector.headTime))
      case .status(let code, let retryAfter):
        let retryable = [429, 502, 503, 504].contains(code)
        throw Failure(error: .httpStatus(code), retryable: retryable, retryAfter: retryAfter)
      case .tooLarge, nil:
        throw Failure(error: .tooLarge(limit: limits.maxSourceBytes))
      }
    case .failed(let failure, let message):
      if failure == .addressRefused { counters.refusedConnections.add(1, ordering: .relaxed) }
      throw Failure(error: error(for: failure, message), retryable: failure.isRetryable)
    }
  }

  /// The media types thumbd can read, for `Accept`.
  static let accept = "image/jpeg,image/png;q=0.9,image/*;q=0.5"

  private func error(for failure: TransportFailure, _ message: String) -> FetchError {
    switch failure {
    case .addressRefused: .notAllowed("the origin's address is not allowed")
    case .connect: .transport("cannot connect to the origin")
    case .reset: .transport("the origin closed the connection early")
    case .headTimeout: .timedOut("no response within \(limits.connectTimeout) s")
    case .timeout: .timedOut("the fetch took longer than \(limits.totalTimeout) s")
    case .tls: .transport("TLS: \(message)")
    case .tooLarge: .tooLarge(limit: limits.maxSourceBytes)
    case .protocolViolation: .badResponse(message)
    case .unavailable: .transport(message)
    case .other: .transport(message.isEmpty ? "the transfer failed" : message)
    }
  }

  /// Runs one exchange to its end. Cancelling the calling task cancels the transfer; the
  /// answer still waits for the transport's `finish`, which comes after the connection is
  /// closed, so nothing of this fetch outlives the call.
  private func exchange(_ request: TransportRequest, _ collector: BodyCollector) async
    -> TransportEnd
  {
    let handle = TransferHandle()
    return await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        collector.onFinish(continuation)
        handle.attach(transport.start(request, receiver: collector))
      }
    } onCancel: {
      handle.cancel()
    }
  }
}

/// Counts what the fetcher did, for metrics.
public final class FetchCounters: Sendable {
  /// Attempts made again after a retryable failure.
  public let retries = Atomic<Int>(0)
  /// Redirect hops followed.
  public let redirects = Atomic<Int>(0)
  /// Exchanges that ended because every address was refused at connect time.
  public let refusedConnections = Atomic<Int>(0)

  /// Zeroed counters.
  public init() {}
}

/// Holds a transfer for cancellation, which may come before `start` returned.
private final class TransferHandle: Sendable {
  private let state = Mutex<(transfer: (any TransportTransfer)?, cancelled: Bool)>((nil, false))

  func attach(_ transfer: any TransportTransfer) {
    let cancelled = state.withLock { state -> Bool in
      state.transfer = transfer
      return state.cancelled
    }
    if cancelled { transfer.cancel() }
  }

  func cancel() {
    let transfer = state.withLock { state -> (any TransportTransfer)? in
      state.cancelled = true
      return state.transfer
    }
    transfer?.cancel()
  }
}

/// Receives one exchange: the body under the cap, or why it stopped.
final class BodyCollector: TransportReceiver, @unchecked Sendable {
  // @unchecked: `bytes` and `stopReason` are written on the transport thread before
  // `finish`, and read only after the continuation it resumes.
  enum StopReason {
    case redirect(String)
    case notModified
    case status(Int, retryAfter: Double?)
    case tooLarge
    /// The declared body is larger than the memory held for it (see `ByteMeter.fits`).
    case needsRoom(Int)
  }

  let limit: Int
  private var bytes: [UInt8] = []
  private let meter: ByteMeter?
  /// Bytes reported to the meter and still held here: handed on by `takeBytes`, given back
  /// when the collector goes (a redirect's or a failed attempt's body).
  private var metered = 0
  private(set) var stopReason: StopReason?
  /// The final head, and when it arrived (seconds since 1970).
  private(set) var head: ResponseHead?
  private(set) var headTime: Double = 0
  private let continuation = Mutex<CheckedContinuation<TransportEnd, Never>?>(nil)

  /// Shown the body until it has seen enough; nil from then on.
  private var watcher: (any BodyWatching)?

  /// Whether a body the meter cannot hold stops the exchange at its head (`needsRoom`).
  private let askingRoom: Bool

  init(
    limit: Int, meter: ByteMeter? = nil, watcher: (any BodyWatching)? = nil,
    askingRoom: Bool = true
  ) {
    self.limit = limit
    self.meter = meter
    self.watcher = watcher
    self.askingRoom = askingRoom
  }

  deinit { meter?.count(-metered) }

  func onFinish(_ continuation: CheckedContinuation<TransportEnd, Never>) {
    self.continuation.withLock { $0 = continuation }
  }

  func takeBytes() -> [UInt8] {
    defer {
      bytes = []
      metered = 0
    }
    return bytes
  }

  func receive(head: ResponseHead) -> Bool {
    self.head = head
    headTime = WallClock.now()
    switch head.status {
    case 200..<300:
      let declared = (try? head.declaredLength()) ?? nil
      if let declared, declared > limit {
        stopReason = .tooLarge
        return false
      }
      if askingRoom, let declared, let meter, !meter.fits(declared) {
        stopReason = .needsRoom(declared)
        return false
      }
      // The whole allowance at once, never grown: growing by doubling copies and briefly
      // holds one and a half times the body. Untouched pages of the reservation cost no
      // resident memory, so an unsized body costs what actually arrives.
      bytes.reserveCapacity(min(declared ?? limit, limit))
      watcher?.bodyStarted()
      return true
    case 301, 302, 303, 307, 308:
      if let location = head.value("location"), !location.isEmpty {
        stopReason = .redirect(location)
        return false
      }
      stopReason = .status(head.status, retryAfter: nil)
      return false
    case 304:
      stopReason = .notModified
      return false
    default:
      stopReason = .status(head.status, retryAfter: head.retryAfter(now: headTime))
      return false
    }
  }

  func receive(body: UnsafeRawBufferPointer) -> Bool {
    guard body.count <= limit - bytes.count else {
      stopReason = .tooLarge
      return false
    }
    bytes.append(contentsOf: body)
    metered += body.count
    meter?.count(body.count)
    if let watcher, !bytes.withUnsafeBytes({ watcher.bodyGrew($0) }) { self.watcher = nil }
    return true
  }

  func finish(_ end: TransportEnd) {
    continuation.withLock { continuation in
      continuation?.resume(returning: end)
      continuation = nil
    }
  }
}
