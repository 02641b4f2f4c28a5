import ImagePipeline

/// One event loop's memory-hit fast path, in front of the router as a cache sits in front of
/// a web framework's handlers: which requests of a read pass are answered at once
/// (`PassTargets`), the responses kept ready to be given again with their shared checks, and
/// the request heads known byte for byte (`ReadyResponses`). A connection asks it first and
/// the router only when it has nothing: `hits.answer(request) ?? router.answer(request)`.
/// Touched on its loop's thread alone.
///
/// Rules kept here:
/// - A kept response is keyed by its target, its listener and the headers its route reads
///   (`Route.reads`, the only ones a route's requests carry), so a route's declaration is the
///   whole of what keys its hits.
/// - A later request gets the kept bytes only after the route's own checks and counts for it
///   (`ResponseReuse.again`), or a check made for a request that arrived no earlier
///   (`ResponseReuse.shared`).
/// - When those checks give another answer, that answer is given and the entry goes.
final class HitPath: @unchecked Sendable {
  // @unchecked: loop-thread state only.
  /// The router behind it, whose routes' declarations key the kept responses.
  let router: Router
  /// The kept responses and known heads.
  let ready: ReadyResponses
  private let passTargets = PassTargets()

  /// The fast path in front of `router`, keeping its responses in `ready`.
  init(router: Router, ready: ReadyResponses = ReadyResponses()) {
    self.router = router
    self.ready = ready
  }

  /// The heads the loop's parsers may take requests from instead of parsing them again.
  var knownHeads: any KnownHeads { ready }

  /// Whether `request`, read in pass `pass` and not seen arriving by the poll, is the first of
  /// the pass for its target: answered at once with a check of its own. The others wait for
  /// the pass's end, where one check, later than all of them, serves them all.
  func firstOfPass(_ request: HTTPRequest, pass: UInt64) -> Bool {
    passTargets.first(request.target.hashValue, in: pass)
  }

  /// What the fast path gives a request.
  enum Answer {
    /// The kept response still answers: its bytes (with this second's `Date`), and the
    /// response and image source they stand for, for the access log.
    case kept(
      bytes: (head: [UInt8], body: [UInt8]), response: HTTPResponse, source: ResponseSource?)
    /// The kept response no longer answers: the route's answer instead, counted.
    case replaced(RouteAnswer)
  }

  /// The answer for `request` from a response kept under its key; nil when none is kept.
  func answer(_ request: HTTPRequest, keepAlive: Bool, limits: HTTPLimits) -> Answer? {
    guard let kept = ready.entry(for: request) else { return nil }
    // What the route sees of it (`Route.reads`): the fields of the key, which are the kept
    // entry's own, so no new list is made on the hit path.
    var seen = request
    seen.headers = kept.headers
    var other: RouteAnswer?
    if ready.shares(kept, request) {
      kept.reuse.shared?.count(seen)
    } else {
      let check = ready.beginCheck(of: kept, for: request)
      other = kept.reuse.again(seen)
      if other == nil { ready.checked(request, check) }
    }
    guard let other else {
      router.count(kept.response.status, format: kept.format)
      ready.know(request, limits: limits)
      return .kept(
        bytes: ready.wire(kept, for: request, keepAlive: keepAlive), response: kept.response,
        source: kept.source)
    }
    ready.remove(request.target)
    return .replaced(router.counted(other))
  }

  /// Keeps `response`, which the router gave `request` at once, when it says how it may be
  /// given again. Returns the bytes it made (a kept-alive GET's answer), for the caller to
  /// write instead of making them again.
  func keep(
    _ response: HTTPResponse, _ source: ResponseSource?, for request: HTTPRequest,
    limits: HTTPLimits
  ) -> (head: [UInt8], body: [UInt8])? {
    guard response.reuse != nil, let reads = router.reads(for: request) else { return nil }
    return ready.keep(response, source, for: request, reads: reads, limits: limits)
  }
}

/// Request targets answered at once in the loop's current read pass (their hashes): a repeat
/// of one waits for the pass to end, when one check of its source, later than every request
/// of the pass, serves them all. One per `HitPath`; touched on its loop's thread alone.
private final class PassTargets: @unchecked Sendable {
  // @unchecked: loop-thread state only.
  private var pass: UInt64 = 0
  private var seen = Set<Int>()

  /// True the first time `key` is offered in read pass `pass`.
  func first(_ key: Int, in pass: UInt64) -> Bool {
    if pass != self.pass {
      seen.removeAll(keepingCapacity: true)
      self.pass = pass
    }
    return seen.insert(key).inserted
  }
}
