import ImagePipeline
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// Responses kept ready to be written again, one table per event loop (touched on its thread
/// alone): a memory hit's head and body as they went out, keyed by the request target and the
/// request headers that may choose an answer. A later GET or HEAD with the same key skips the
/// router and the route's reading of the request: the response's `ResponseReuse` makes the
/// checks and counts of a memory hit (the cache still holds the thumbnail, its source is
/// unchanged and fresh), and the bytes go out again with only `Date` renewed. When the checks
/// give another answer, that answer is given and replaces the entry.
///
/// The headers in the key are those the answering route reads (`Route.reads`, the only ones
/// its requests carry), so a header a route starts reading is keyed by its declaration alone.
/// One entry per target (the latest variant); at most `maxEntries` entries and `maxBytes` of
/// heads and bodies, an arbitrary one leaving when either would be passed.
///
/// Targets that name the same answer (the same options in another order: `ResponseReuse`'s
/// `identity`) share one entry: a response the route made for another target, equal to a kept one
/// byte for byte and asked for with the same headers, makes its target another name of that entry
/// (at most `aliasesPerEntry`) and goes out as the entry's bytes. A body is the memory cache's own
/// storage while the cache holds it, so the bytes bound only what an entry keeps alive after the
/// cache let go.
///
/// The table also knows the request heads that found its entries, byte for byte
/// (`KnownHeads`, at most `headsPerEntry` per entry, counted in its bytes): the connections'
/// parsers take a repeated head's request from here instead of parsing it again. A head
/// leaves with its entry.
final class ReadyResponses: KnownHeads, @unchecked Sendable {
  // @unchecked: loop-thread state only.

  /// One kept response.
  struct Entry {
    /// The headers the route reads (`Route.reads`): those of the key.
    var reads: Set<String>
    /// The request's fields of those headers, in the order it sent them.
    var headers: [HTTPRequest.HeaderField]
    /// Whether the request came over the network: routes answer the Unix socket differently.
    var overNetwork: Bool
    /// The response as the route made it, for the access log.
    var response: HTTPResponse
    /// The thumbnail's format, for the counts.
    var format: ImageFormat?
    /// Where the image came from.
    var source: ResponseSource?
    /// How the route checks it again.
    var reuse: ResponseReuse
    /// The bytes of a kept-alive GET's answer, with the `Date` of `second`.
    var wire: (head: [UInt8], body: [UInt8])
    /// The wall-clock second of `wire`'s `Date`.
    var second: Int
    /// Bytes counted against `maxBytes`.
    var bytes: Int
    /// The keys in `heads` of the heads known to find this entry.
    var heads: [Int] = []
    /// What the response answers (`ResponseReuse.identity`), with the request's listener and
    /// headers: the key in `identities`.
    var identity: Identity?
    /// The other targets this entry answers.
    var aliases: [String] = []
    /// The last check that found the kept response still the answer, when its reuse lets
    /// requests share checks.
    var checked: Check?
  }

  /// A check of a kept response that found it still the answer.
  struct Check {
    /// When the request it was made for had arrived by (its `received`).
    var received: ContinuousClock.Instant
    /// The wall-clock second it was made in.
    var second: Int
    /// The reuse's epoch, read before it was made.
    var epoch: UInt64
  }

  /// What a kept response answers, and for which requests: other targets with the same
  /// identity may share its entry.
  struct Identity: Hashable {
    var answer: AnyHashable
    var overNetwork: Bool
    var headers: [String]
  }

  /// A request head known byte for byte, and what it parsed to.
  struct KnownHead {
    var bytes: [UInt8]
    var limits: HTTPLimits
    /// The request as parsed, without what its connection added.
    var request: HTTPRequest
  }

  /// Heads known to find an entry, by the hash of their bytes.
  private var heads: [Int: KnownHead] = [:]
  /// Heads one entry may have known at most (each client's own `User-Agent`, say).
  static let headsPerEntry = 4
  /// Entries at most.
  let maxEntries: Int
  /// Bytes of heads and bodies at most.
  let maxBytes: Int
  /// The wall-clock second a `Date` made now names (a test's own clock in tests).
  private let second: () -> Int
  private var entries: [String: Entry] = [:]
  /// Targets another target's entry answers too: alias to the target its entry is kept under.
  private var aliases: [String: String] = [:]
  /// Entries by what they answer: identity to target.
  private var identities: [Identity: String] = [:]
  /// Targets one entry answers at most besides its own.
  static let aliasesPerEntry = 8
  /// Bytes kept now.
  private(set) var bytes = 0
  /// Requests answered with a kept response so far.
  private(set) var reused = 0
  /// Heads found known so far (not parsed again).
  private(set) var headsFound = 0
  /// Requests that shared an earlier request's check so far.
  private(set) var sharedChecks = 0
  /// Responses the route made that went out as another target's kept bytes so far.
  private(set) var sharedAcrossTargets = 0

  /// A table of at most `maxEntries` entries and `maxBytes` bytes.
  init(
    maxEntries: Int = 1024, maxBytes: Int = 4 << 20,
    second: @escaping () -> Int = ResponseDate.second
  ) {
    self.maxEntries = maxEntries
    self.maxBytes = maxBytes
    self.second = second
  }

  /// Entries kept now.
  var count: Int { entries.count }

  /// Targets answered by another target's entry now.
  var aliasCount: Int { aliases.count }

  /// The target `target`'s entry is kept under: its own, or the one it is an alias of.
  private func home(_ target: String) -> String { aliases[target] ?? target }

  /// The entry for `request` when one is kept under its key.
  func entry(for request: HTTPRequest) -> Entry? {
    guard request.method == "GET" || request.method == "HEAD",
      let entry = entries[home(request.target)], entry.overNetwork == request.overNetwork
    else { return nil }
    var kept = entry.headers.makeIterator()
    for field in request.headers where entry.reads.contains(field.name) {
      guard let other = kept.next(), other == field else { return nil }
    }
    return kept.next() == nil ? entry : nil
  }

  /// Whether `request` may take `entry`'s last check as its own (`ResponseReuse.shared`): it
  /// arrived no later than the request that check was made for, so the source was checked
  /// after it arrived; the reuse's epoch is what it was before that check, so the thumbnail
  /// has stayed in the cache; and it is the same wall-clock second.
  func shares(_ entry: Entry, _ request: HTTPRequest) -> Bool {
    guard let shared = entry.reuse.shared, let check = entry.checked,
      let received = request.received, received <= check.received,
      check.second == second(), shared.epoch() == check.epoch
    else { return false }
    sharedChecks += 1
    return true
  }

  /// What a check of `entry` for `request` about to be made may be shared as, read before it
  /// is made: nil when its reuse shares no checks.
  func beginCheck(of entry: Entry, for request: HTTPRequest) -> Check? {
    guard let shared = entry.reuse.shared, let received = request.received else { return nil }
    return Check(received: received, second: second(), epoch: shared.epoch())
  }

  /// Notes that `check` (from `beginCheck`) found the entry for `request` still the answer.
  func checked(_ request: HTTPRequest, _ check: Check?) {
    guard let check else { return }
    entries[home(request.target)]?.checked = check
  }

  /// The bytes that answer `request` with the kept `entry`: the kept-alive GET's own bytes
  /// while their `Date` is this second's (renewed in the table otherwise), else made afresh.
  func wire(_ entry: Entry, for request: HTTPRequest, keepAlive: Bool) -> (
    head: [UInt8], body: [UInt8]
  ) {
    let headOnly = request.method == "HEAD"
    reused += 1
    guard keepAlive && !headOnly else {
      return entry.response.wire(keepAlive: keepAlive, headOnly: headOnly)
    }
    let second = self.second()
    if second == entry.second { return entry.wire }
    let wire = entry.response.wire(keepAlive: true)
    entries[home(request.target)]?.wire = wire
    entries[home(request.target)]?.second = second
    return wire
  }

  /// The request a head known byte for byte parsed to under the same limits.
  func request(for head: ArraySlice<UInt8>, limits: HTTPLimits) -> HTTPRequest? {
    guard let index = heads.index(forKey: Self.key(of: head)) else { return nil }
    let known = heads.values[index]
    guard known.limits == limits, Self.same(known.bytes, head) else { return nil }
    headsFound += 1
    return known.request
  }

  /// Whether `a` and `b` hold the same bytes.
  private static func same(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool {
    a.count == b.count
      && a.withUnsafeBytes { a in
        b.withUnsafeBytes { memcmp(a.baseAddress!, $0.baseAddress!, a.count) == 0 }
      }
  }

  /// The key of a head's bytes in `heads`: FNV-1a over 8-byte words. Not seeded, and it need
  /// not be: a head that collides with a known one is told apart by its bytes (and is only
  /// parsed), and the dictionary hashes the key again with its own seed.
  private static func key(of head: ArraySlice<UInt8>) -> Int {
    head.withUnsafeBytes { Int(truncatingIfNeeded: FNV1a.words($0)) }
  }

  /// Keeps `response` for `request`'s key (its target, listener and the headers `reads`
  /// names: the answering route's) when it says how it may be given again, and the request's
  /// head as known (`rawHead`, parsed under `limits`). Returns the bytes it made (a
  /// kept-alive GET's answer), for the caller to write instead of making them again.
  @discardableResult
  func keep(
    _ response: HTTPResponse, _ source: ResponseSource?, for request: HTTPRequest,
    reads: Set<String>, limits: HTTPLimits = HTTPLimits()
  ) -> (head: [UInt8], body: [UInt8])? {
    guard let reuse = response.reuse, request.method == "GET" || request.method == "HEAD" else {
      return nil
    }
    let headers = request.headers.filter { reads.contains($0.name) }
    let identity = reuse.identity.map {
      Identity(
        answer: AnyHashable($0), overNetwork: request.overNetwork,
        headers: headers.map { $0.name + ":" + $0.value })
    }
    if let identity, let shared = share(response, for: request, as: identity) {
      know(request, limits: limits)
      return shared
    }
    // Read before the bytes are made: a second that turns meanwhile costs one more renewal.
    let second = self.second()
    let bytes = response.wire(keepAlive: true)
    let size = request.target.utf8.count + bytes.head.count + bytes.body.count
    guard size <= maxBytes / 8 else { return bytes }
    remove(request.target)
    if let identity, let other = identities[identity] { remove(other) }
    while entries.count >= maxEntries || self.bytes + size > maxBytes,
      let any = entries.keys.first
    {
      remove(any)
    }
    entries[request.target] = Entry(
      reads: reads, headers: headers, overNetwork: request.overNetwork, response: response,
      format: response.imageFormat.flatMap(ImageFormat.init(rawValue:)), source: source,
      reuse: reuse, wire: bytes, second: second, bytes: size, identity: identity)
    if let identity { identities[identity] = request.target }
    self.bytes += size
    know(request, limits: limits)
    return bytes
  }

  /// The kept bytes of the entry that answers `identity`, when `response` (made by the route
  /// for `request`, another target) equals that entry's response byte for byte but `Date`:
  /// `request`'s target becomes another name of the entry. Nil when there is none, it differs,
  /// or the entry has all the names it may.
  private func share(_ response: HTTPResponse, for request: HTTPRequest, as identity: Identity)
    -> (head: [UInt8], body: [UInt8])?
  {
    guard let target = identities[identity], target != request.target,
      var entry = entries[target], entry.response == response,
      entry.aliases.count < Self.aliasesPerEntry,
      bytes + request.target.utf8.count <= maxBytes
    else { return nil }
    if aliases[request.target] != target {
      remove(request.target)
      entry.aliases.append(request.target)
      entry.bytes += request.target.utf8.count
      bytes += request.target.utf8.count
      aliases[request.target] = target
    }
    let second = self.second()
    if second != entry.second {
      (entry.wire, entry.second) = (response.wire(keepAlive: true), second)
    }
    entries[target] = entry
    sharedAcrossTargets += 1
    return entry.wire
  }

  /// Notes `request`'s head as known, when it was parsed (not known already), carries no
  /// body, and found an entry that has room for another head.
  func know(_ request: HTTPRequest, limits: HTTPLimits) {
    let target = home(request.target)
    guard let head = request.rawHead, request.body.isEmpty,
      var entry = entries[target], entry.heads.count < Self.headsPerEntry,
      bytes + head.count <= maxBytes
    else { return }
    let key = Self.key(of: head[...])
    guard heads[key] == nil else { return }
    var parsed = request
    (parsed.rawHead, parsed.received, parsed.overNetwork, parsed.peer) = (nil, nil, false, nil)
    heads[key] = KnownHead(bytes: head, limits: limits, request: parsed)
    entry.heads.append(key)
    entry.bytes += head.count
    bytes += head.count
    entries[target] = entry
  }

  /// The entry kept for `target` (or that it is an alias of), whatever the headers (for
  /// tests).
  func entry(target: String) -> Entry? { entries[home(target)] }

  /// Forgets the entry for `target` (its own, or the one it is an alias of), if any, with the
  /// heads known to find it and every other name it has: a kept response no longer the answer
  /// for one of its targets is the answer for none.
  func remove(_ target: String) {
    let kept = home(target)
    guard let gone = entries.removeValue(forKey: kept) else { return }
    bytes -= gone.bytes
    for key in gone.heads { heads[key] = nil }
    for alias in gone.aliases { aliases[alias] = nil }
    if let identity = gone.identity, identities[identity] == kept { identities[identity] = nil }
  }

  /// Heads known now (for tests).
  var knownHeads: Int { heads.count }
}
