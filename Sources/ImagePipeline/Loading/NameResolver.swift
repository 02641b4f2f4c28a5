import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Turns host names into addresses. The fetcher checks every address against the policy and
/// hands the transport exactly those, so the name is resolved once per attempt and nothing
/// else resolves it again.
public protocol NameResolving: Sendable {
  /// Every address `host` has. Throws `FetchError.timedOut` when no answer came within
  /// `timeout` seconds and `CancellationError` when the calling task is cancelled; either way
  /// the caller is answered at once, whatever the lookup itself is still doing.
  func addresses(of host: String, timeout: Double) async throws -> [IPAddress]
}

/// The system resolver (getaddrinfo, so /etc/hosts, nsswitch and resolv.conf apply) on a
/// bounded pool of threads of its own.
///
/// getaddrinfo blocks and cannot be cancelled, and a resolver that never answers holds a
/// thread for its full retry schedule. So lookups never run on callers' threads: a caller
/// waits at most its timeout, and leaving frees it (and its fetch slot) at once. Lookups of
/// the same name share one call; at most `maxThreads` calls run, the rest wait in a bounded
/// queue; answers are kept `cacheSeconds`. Caching cannot weaken the address rules: the
/// transport checks every address again right before it connects.
public final class SystemResolver: NameResolving, @unchecked Sendable {
  // @unchecked: `state` is only touched with `lock` held.
  private struct Lookup {
    var waiters: Set<UInt64> = []
  }

  private struct Waiting {
    let host: String
    let continuation: CheckedContinuation<[IPAddress], any Error>
  }

  private struct State {
    var lookups: [String: Lookup] = [:]
    var queue: [String] = []
    var cache: [String: (addresses: [IPAddress], expires: UInt64)] = [:]
    var threads = 0
    var running = 0
    var idleThreads = 0
    /// Callers waiting for an answer. A deadline or a cancellation that comes before a
    /// caller queued answers it as soon as it would, so nobody waits for a lookup they left.
    var waiting = WaiterList<Waiting>()
  }

  /// Lookups running at once (threads).
  public let maxThreads: Int
  /// Distinct names allowed to wait for a thread; past that, lookups fail at once.
  public let maxQueued: Int
  /// Seconds an answer is reused.
  public let cacheSeconds: Double
  private let lock = ConditionLock()
  private var state = State()

  /// The lookup itself: getaddrinfo, or a stand-in in tests.
  private let resolve: @Sendable (String) -> Result<[IPAddress], FetchError>

  /// Creates a resolver; threads start on demand and end after 30 idle seconds.
  public convenience init(maxThreads: Int = 16, maxQueued: Int = 1024, cacheSeconds: Double = 30) {
    self.init(
      maxThreads: maxThreads, maxQueued: maxQueued, cacheSeconds: cacheSeconds,
      resolve: SystemResolver.getaddrinfo)
  }

  /// A resolver whose lookups are `resolve` (tests hold them at a gate).
  init(
    maxThreads: Int, maxQueued: Int, cacheSeconds: Double,
    resolve: @escaping @Sendable (String) -> Result<[IPAddress], FetchError>
  ) {
    self.maxThreads = max(1, maxThreads)
    self.maxQueued = max(1, maxQueued)
    self.cacheSeconds = cacheSeconds
    self.resolve = resolve
  }

  /// See `NameResolving`.
  public func addresses(of host: String, timeout: Double) async throws -> [IPAddress] {
    let now = Self.now()
    let (cached, id) = lock.withLock { () -> ([IPAddress]?, UInt64) in
      guard let entry = state.cache[host], entry.expires > now else {
        return (nil, state.waiting.arrive())
      }
      return (entry.addresses, 0)
    }
    if let cached { return cached }
    let timer = Task { [weak self] in
      try await Task.sleep(for: .milliseconds(Int64(max(0, timeout) * 1000)))
      self?.leave(id, with: FetchError.timedOut("no name lookup answer within \(timeout) s"))
    }
    defer { timer.cancel() }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        enqueue(host, id, continuation)
      }
    } onCancel: {
      leave(id, with: CancellationError())
    }
  }

  private func enqueue(
    _ host: String, _ id: UInt64, _ continuation: CheckedContinuation<[IPAddress], any Error>
  ) {
    enum Next {
      case queued, startThread, refuse
      case gone(any Error)
    }
    let next = lock.withLock { () -> Next in
      if let error = state.waiting.queue(id, Waiting(host: host, continuation: continuation)) {
        return .gone(error)
      }
      if state.lookups[host] == nil {
        guard state.queue.count < maxQueued else {
          _ = state.waiting.remove(id)
          return .refuse
        }
        state.lookups[host] = Lookup()
        state.queue.append(host)
      }
      state.lookups[host]!.waiters.insert(id)
      if state.idleThreads > 0 {
        lock.signal()
        return .queued
      }
      guard state.threads < maxThreads else { return .queued }
      state.threads += 1
      return .startThread
    }
    switch next {
    case .gone(let error):
      continuation.resume(throwing: error)
    case .refuse:
      continuation.resume(throwing: FetchError.transport("too many name lookups are waiting"))
    case .startThread:
      SystemThread.detach(name: "thumbd-resolve", stackSize: 256 << 10) { [self] in workLoop() }
    case .queued:
      break
    }
  }

  /// Answers one waiter early (deadline, cancellation); its lookup goes on for the others.
  private func leave(_ id: UInt64, with error: any Error) {
    let waiter = lock.withLock { () -> Waiting? in
      guard let waiter = state.waiting.leave(id, with: error) else { return nil }
      state.lookups[waiter.host]?.waiters.remove(id)
      return waiter
    }
    waiter?.continuation.resume(throwing: error)
  }

  /// Callers waiting for an answer now.
  var waitingCount: Int { lock.withLock { state.waiting.count } }
  /// Lookups running now.
  var lookupsRunning: Int { lock.withLock { state.running } }

  private func workLoop() {
    while let host = nextHost() {
      let result = resolve(host)
      let waiters = lock.withLock { () -> [CheckedContinuation<[IPAddress], any Error>] in
        state.running -= 1
        if case .success(let addresses) = result, cacheSeconds > 0 {
          let now = Self.now()
          if state.cache.count >= 4096 {
            state.cache = state.cache.filter { $0.value.expires > now }
            if state.cache.count >= 4096 { state.cache.removeAll() }
          }
          state.cache[host] = (addresses, now + UInt64(cacheSeconds * 1e9))
        }
        let ids = state.lookups.removeValue(forKey: host)?.waiters ?? []
        return ids.compactMap { state.waiting.remove($0)?.entry.continuation }
      }
      for waiter in waiters { waiter.resume(with: result.mapError { $0 as any Error }) }
    }
  }

  /// The next name someone still waits for; nil (and the thread ends) after 30 idle seconds.
  private func nextHost() -> String? {
    lock.lock()
    defer { lock.unlock() }
    while true {
      while !state.queue.isEmpty {
        let host = state.queue.removeFirst()
        guard let lookup = state.lookups[host] else { continue }
        if lookup.waiters.isEmpty {
          state.lookups[host] = nil  // everyone left while it waited
          continue
        }
        // Still in `lookups` while it runs: later callers join it.
        state.running += 1
        return host
      }
      state.idleThreads += 1
      let woken = lock.wait(seconds: 30)
      state.idleThreads -= 1
      if !woken && state.queue.isEmpty {
        state.threads -= 1
        return nil
      }
    }
  }

  @Sendable private static func getaddrinfo(_ host: String) -> Result<[IPAddress], FetchError> {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var list: UnsafeMutablePointer<addrinfo>?
    let status = Glibc.getaddrinfo(host, nil, &hints, &list)
    guard status == 0, let first = list else {
      return .failure(
        .transport("cannot resolve \(host): \(String(cString: gai_strerror(status)))"))
    }
    defer { freeaddrinfo(first) }
    var addresses: [IPAddress] = []
    var cursor: UnsafeMutablePointer<addrinfo>? = first
    while let info = cursor {
      if let sockaddr = info.pointee.ai_addr {
        if info.pointee.ai_family == AF_INET {
          sockaddr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
            addresses.append(IPAddress($0.pointee.sin_addr))
          }
        } else if info.pointee.ai_family == AF_INET6 {
          sockaddr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
            var address = $0.pointee.sin6_addr
            addresses.append(.v6(withUnsafeBytes(of: &address) { Array($0) }))
          }
        }
      }
      cursor = info.pointee.ai_next
    }
    var unique: [IPAddress] = []
    for address in addresses where !unique.contains(address) { unique.append(address) }
    return unique.isEmpty ? .failure(.transport("\(host) has no address")) : .success(unique)
  }

  private static func now() -> UInt64 { MonotonicClock.nanoseconds() }
}
