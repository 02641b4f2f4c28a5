import ImagePipeline
import ThumbProtocol
import ThumbSystem

/// `GET /v1/thumbnail?url=&w=&h=&scale=&fit=&format=&quality=&colour=&priority=&rev=` (and
/// HEAD).
public struct ThumbnailRoute: Sendable {
  /// The pipeline that does the work.
  public let pipeline: ThumbnailPipeline
  /// The longest `Cache-Control: max-age`, in seconds; a source's remaining freshness is
  /// shorter when it is.
  public let maxAge: Int
  /// `Cache-Control` for a source fresh for `maxAge` or longer.
  private let fullAge: (public: String, private: String)
  /// Defaults for parameters a request leaves out.
  public let parameters: ThumbnailParameters
  /// Whether unsigned requests (this query form) over TCP are refused: signing keys are
  /// configured and `allow_unsigned_tcp` is off.
  public let refusesUnsignedOverNetwork: Bool
  /// Limits per client on misses over TCP (`client_miss_rate`); nil: none.
  public let limiter: ClientLimiter?

  /// The client HTTP prefetch requests without `X-Thumbd-Client` count as. Without a name
  /// there is no telling a list's look-ahead from cache warming, so all of it is treated as
  /// warming: it never counts as showing anything, and yields while visible requests arrive
  /// (see `PrefetchAdmission`).
  public static let prefetchClient = ClientID(.max)

  /// The client a request is for: the one its `X-Thumbd-Client` header names (requests naming
  /// the same client share prefetch places and count as showing things together, like one
  /// session); else, for visible and normal requests, the address it came from (the peer, or
  /// the forwarded client behind a trusted proxy), so the fetch and decode queues share their
  /// turns fairly between addresses; else `shared`. Prefetch without a name is
  /// `prefetchClient`.
  func client(
    of request: HTTPRequest, priority: ImagePriority, address: IPAddress?
  ) -> ClientID {
    if let name = request.header("x-thumbd-client"), !name.isEmpty {
      return ClientID(name: name)
    }
    if priority == .prefetch { return Self.prefetchClient }
    return address.map(ClientID.init(address:)) ?? .shared
  }

  /// The address `request` counts as, for limits and fair turns: the limiter's reading (peer,
  /// or forwarded behind a trusted proxy), else the TCP peer; nil on the Unix socket.
  func address(of request: HTTPRequest) -> IPAddress? {
    if let limiter { return limiter.client(of: request) }
    return request.overNetwork ? request.peer.map(ClientLimiter.key) : nil
  }

  /// A miss from `address`: nil to go ahead (a token taken), or the 429 with `Retry-After`
  /// when its bucket is empty.
  func missRefusal(from address: IPAddress?) -> HTTPResponse? {
    guard let limiter, let address, let wait = limiter.admit(address, now: .now) else {
      return nil
    }
    var response = HTTPResponse.error(
      429, kind: "too_many_requests",
      message: "this client's misses are over client_miss_rate; retry later")
    response.headers.append(("Retry-After", String(max(1, Int(wait.rounded(.up))))))
    return response
  }

  /// The answer to an unsigned request over TCP when signing keys are set.
  static let unsignedRefusal = HTTPResponse.error(
    403, kind: "unsigned_request",
    message: "the TCP listener takes signed paths only (see signing_keys, allow_unsigned_tcp)")

  /// Creates the route.
  public init(
    pipeline: ThumbnailPipeline, maxAge: Int = 86_400,
    parameters: ThumbnailParameters = ThumbnailParameters(),
    refusesUnsignedOverNetwork: Bool = false, limiter: ClientLimiter? = nil
  ) {
    self.limiter = limiter
    self.refusesUnsignedOverNetwork = refusesUnsignedOverNetwork
    self.pipeline = pipeline
    self.maxAge = maxAge
    fullAge = ("public, max-age=\(maxAge)", "private, max-age=\(maxAge)")
    self.parameters = parameters
  }

  /// The request headers `client(of:)` and `address(of:)` read: the client's name and its
  /// forwarded address.
  static let clientReads: Set<String> = Set(["x-thumbd-client"]).union(ClientLimiter.reads)
  /// The request headers a thumbnail's answer reads: the client's, `If-None-Match`, `Accept`
  /// and the client hints.
  static let reads: Set<String> = clientReads.union(["if-none-match"])
    .union(AcceptedFormats.reads).union(ClientHints.reads)

  /// The route for `/v1/thumbnail`.
  public var route: Route {
    Route(path: "/v1/thumbnail", reads: Self.reads) { [self] request in answer(request) }
  }

  /// Reads the request once: a memory hit is answered at once, on the calling thread; a
  /// miss becomes work whose subscription lasts as long as the task waiting for it (the client
  /// going away cancels it and leaves only this request's interest); a bad query is a 400.
  public func answer(_ request: HTTPRequest) -> RouteAnswer {
    if request.overNetwork && refusesUnsignedOverNetwork { return .now(Self.unsignedRefusal, nil) }
    switch Self.parse(request, parameters: parameters) {
    case .request(let imageRequest, let priority, let varies):
      return answer(request, for: imageRequest, priority: priority, varies: varies)
    case .rejected(let response): return .now(response, nil)
    }
  }

  /// Answers `request` with the image `imageRequest` asks for (also the path form's way in);
  /// the response varies on the request headers `varies` names.
  func answer(
    _ request: HTTPRequest, for imageRequest: ImageRequest, priority: ImagePriority,
    varies: [String]
  ) -> RouteAnswer {
    let address = address(of: request)
    let client = client(of: request, priority: priority, address: address)
    switch pipeline.lookup(
      imageRequest, priority: priority, client: client, received: request.received ?? .now)
    {
    case .hit(let hit):
      return .now(hitResponse(request, imageRequest, priority, hit, varies), hit.source)
    case .miss(let memoryMiss):
      return miss(request, memoryMiss, priority, client, address, varies)
    }
  }

  /// The answer when memory has nothing to give at once: the client's 429 when its misses are
  /// over their rate, else work whose subscription lasts as long as the task waiting for it.
  private func miss(
    _ request: HTTPRequest, _ memoryMiss: MemoryMiss, _ priority: ImagePriority,
    _ client: ClientID, _ address: IPAddress?, _ varies: [String]
  ) -> RouteAnswer {
    if let refusal = missRefusal(from: address) { return .now(refusal, nil) }
    return .later { [self] in
      do {
        let response = try await pipeline.response(
          after: memoryMiss, priority: priority, client: client)
        return (
          answer(request, memoryMiss.request, with: response, varies: varies), response.source
        )
      } catch let error as PipelineError {
        return (ErrorMapping.response(for: error), nil)
      } catch {
        return (.error(499, kind: "cancelled", message: "client went away"), nil)
      }
    }
  }

  /// The response to a memory hit; one whose every header follows from the thumbnail alone
  /// (a 200 from memory, no placeholder asked for) says how a connection may give it again
  /// (`reuse`).
  private func hitResponse(
    _ request: HTTPRequest, _ imageRequest: ImageRequest, _ priority: ImagePriority,
    _ hit: ImageResponse, _ varies: [String]
  ) -> HTTPResponse {
    var response = answer(request, imageRequest, with: hit, varies: varies)
    guard response.status == 200, hit.source == .memory,
      request.queryValue(ThumbnailQuery.placeholder.rawValue) == nil
    else { return response }
    let control = cacheControl(hit.thumbnail.source)
    // A file's check holds for every request that arrived before it was made, while the
    // thumbnail stays in the cache: requests may share it. (An origin's freshness is a
    // matter of time, so each of its hits checks.)
    var shared: ResponseReuse.Shared?
    if case .file = hit.thumbnail.source.validator {
      shared = ResponseReuse.Shared(
        epoch: { [pipeline] in pipeline.memoryRemovals },
        count: { [self] later in
          pipeline.countSharedMemoryHit(
            priority: priority,
            client: client(of: later, priority: priority, address: address(of: later)))
        })
    }
    response.reuse = ResponseReuse(
      again: { [self] later in
        again(later, imageRequest, priority, varies, kept: hit.thumbnail, cacheControl: control)
      }, shared: shared,
      identity: HitIdentity(request: imageRequest, priority: priority, varies: varies))
    return response
  }

  /// What a memory hit's kept response answers: everything its later checks read from the
  /// first request but the client (`ResponseReuse.identity`). The path form's options in
  /// another order, or the query's parameters, name the same one.
  private struct HitIdentity: Hashable, Sendable {
    var request: ImageRequest
    var priority: ImagePriority
    var varies: [String]
  }

  /// A later request with the same target and headers as one answered by `kept`: the same
  /// checks and counts as any memory hit (the cache still holds it, its source is unchanged
  /// and fresh, the client's activity noted), then nil when the response made from `kept` is
  /// still the answer byte for byte but its `Date`, else the answer as `answer` gives it.
  private func again(
    _ request: HTTPRequest, _ imageRequest: ImageRequest, _ priority: ImagePriority,
    _ varies: [String], kept: Thumbnail, cacheControl control: String
  ) -> RouteAnswer? {
    let address = address(of: request)
    let client = client(of: request, priority: priority, address: address)
    let hit: ImageResponse
    switch pipeline.lookup(
      imageRequest, priority: priority, client: client, received: request.received ?? .now)
    {
    case .hit(let found): hit = found
    case .miss(let memoryMiss):
      return miss(request, memoryMiss, priority, client, address, varies)
    }
    let thumbnail = hit.thumbnail
    if hit.source == .memory && thumbnail.digest == kept.digest && thumbnail.format == kept.format
      && thumbnail.data.count == kept.data.count
      && thumbnail.source.lastModified == kept.source.lastModified
      && cacheControl(thumbnail.source) == control
    {
      return nil
    }
    return .now(hitResponse(request, imageRequest, priority, hit, varies), hit.source)
  }

  private func answer(
    _ request: HTTPRequest, _ imageRequest: ImageRequest, with response: ImageResponse,
    varies: [String]
  ) -> HTTPResponse {
    let thumbnail = response.thumbnail
    let etag = Self.etag(of: thumbnail)
    let unchanged = Self.matches(request.header("if-none-match"), etag: etag)
    var headers: [(name: String, value: String)] = []
    headers.reserveCapacity(6)
    if !unchanged { headers.append(("Content-Type", thumbnail.format.mimeType)) }
    headers.append(("ETag", etag))
    headers.append(("Cache-Control", cacheControl(thumbnail.source)))
    if let modified = thumbnail.source.lastModified {
      headers.append(("Last-Modified", Self.lastModified.text(for: modified)))
    }
    headers.append(("X-Thumbd-Cache", response.source.rawValue))
    // Negotiated from Accept, or sized by client hints: a shared cache must key on them,
    // hits included.
    if !varies.isEmpty { headers.append(("Vary", varies.joined(separator: ", "))) }
    if parameters.clientHints != nil { headers.append(("Accept-CH", ClientHints.acceptCH)) }
    if request.queryValue(ThumbnailQuery.placeholder.rawValue) == "1",
      let placeholder = pipeline.placeholder(
        for: imageRequest.url, rev: imageRequest.rev, of: thumbnail)
    {
      headers.append(("X-Thumbd-Placeholder", Base64.standard(placeholder.thumbHash)))
    }
    if unchanged { return HTTPResponse(status: 304, headers: headers) }
    return HTTPResponse(status: 200, headers: headers, body: thumbnail.data)
  }

  /// `Cache-Control` for `source` by `cacheControl(_:maxAge:)`, with the usual values (a
  /// source fresh for at least `maxAge`) made once rather than per response.
  private func cacheControl(_ source: SourceVersion) -> String {
    let freshness = source.freshness
    if !freshness.noStore && freshness.remaining(now: WallClock.now()) >= Double(maxAge) {
      return freshness.isPrivate ? fullAge.private : fullAge.public
    }
    return Self.cacheControl(source, maxAge: maxAge)
  }

  /// `Last-Modified` values already formatted: one source's date is written on every hit.
  static let lastModified = FormattedDates()

  /// `Cache-Control` for a thumbnail of `source`: its remaining freshness, never more than
  /// `maxAge` nor than the origin allows; `no-store` and `private` passed on.
  static func cacheControl(
    _ source: SourceVersion, maxAge: Int, now: Double = WallClock.now()
  ) -> String {
    let freshness = source.freshness
    if freshness.noStore { return "no-store" }
    let remaining = freshness.remaining(now: now)
    let seconds = remaining >= Double(maxAge) ? maxAge : Int(remaining.rounded(.down))
    return (freshness.isPrivate ? "private" : "public") + ", max-age=\(seconds)"
  }

  /// A strong validator: the digest of the thumbnail's bytes, as 16 hex digits in quotes.
  static func etag(of thumbnail: Thumbnail) -> String {
    let digest = thumbnail.digest
    return String(unsafeUninitializedCapacity: 18) { text in
      text[0] = UInt8(ascii: "\"")
      for i in 0..<16 {
        let nibble = UInt8(truncatingIfNeeded: digest >> (60 - 4 * i)) & 15
        text[1 + i] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
      }
      text[17] = UInt8(ascii: "\"")
      return 18
    }
  }

  /// `If-None-Match`: `*` or a list of entity tags, weak ones compared weakly.
  static func matches(_ header: String?, etag: String) -> Bool {
    guard let header else { return false }
    for candidate in header.split(separator: ",") {
      var tag = candidate.trimmingWhitespace()
      if tag == "*" { return true }
      if tag.hasPrefix("W/") { tag.removeFirst(2) }
      if tag == etag { return true }
    }
    return false
  }

  /// Every query parameter `/v1/thumbnail` reads. `parse` reads them only through this type,
  /// so the list is complete by construction; a shared cache in front (nginx's
  /// `proxy_cache_key`) must key on each that shapes the answer, which a test holds it to.
  enum ThumbnailQuery: String, CaseIterable {
    case url, w, h, scale, fit, format, quality, colour, rev, priority, preset, placeholder
    case gravity, crop, rotate, flip, padding, background, enlarge, extend, blur, sharpen
    case pixelate, trim

    /// The geometry and filter parameters, each imgproxy's option of the same name with its
    /// arguments as the value (`gravity=no:10:5` is `gravity:no:10:5`).
    static let geometry: [ThumbnailQuery] = [
      .gravity, .crop, .rotate, .flip, .padding, .background, .enlarge, .extend, .blur,
      .sharpen, .pixelate, .trim,
    ]

    /// Whether the parameter changes the image (priority only orders the work; placeholder
    /// adds a header naming the image's placeholder).
    var shapesImage: Bool { self != .priority && self != .placeholder }

    /// Whether the parameter changes the answer's bytes, head or body: all but priority
    /// (`placeholder=1` adds `X-Thumbd-Placeholder`, so an answer cached without it must not
    /// answer a request with it).
    var shapesAnswer: Bool { self != .priority }

    /// Whether `presets_only` refuses it: it shapes the image other than through a preset.
    var isRawOption: Bool { shapesImage && ![.url, .rev, .preset].contains(self) }
  }

  /// A request's query read: the image asked for, its priority and the request headers its
  /// answer varies on, or the 400 to answer.
  enum Parsed {
    case request(ImageRequest, ImagePriority, varies: [String])
    case rejected(HTTPResponse)
  }

  /// Reads the query of `request`, with `parameters`' defaults. Pure, so fuzzed alone.
  static func parse(_ request: HTTPRequest, parameters: ThumbnailParameters) -> Parsed {
    func bad(_ message: String) -> Parsed {
      .rejected(.error(400, kind: "bad_request", message: message))
    }
    // Parameters are read only by their case in `ThumbnailQuery`: its list is complete.
    func value(_ parameter: ThumbnailQuery) -> String? { request.queryValue(parameter.rawValue) }
    guard let url = value(.url), !url.isEmpty else {
      return bad("the url parameter is required")
    }
    // Every parameter must be one a preset-only request may carry, spelled exactly: an
    // unknown or case-variant name is refused too, not ignored.
    if parameters.presets.only,
      let raw = request.query.first(where: { item in
        ThumbnailQuery(rawValue: item.name).map(\.isRawOption) ?? true
      })
    {
      return bad("'\(raw.name)' is refused: only presets may shape an image (presets_only)")
    }
    var options = ImageOptions()
    parameters.presets.applyDefault(to: &options)
    if let names = value(.preset),
      let problem = parameters.presets.apply(names: names[...], to: &options)
    {
      return bad(problem.message)
    }
    func integer(_ name: ThumbnailQuery, into target: inout Int) -> Bool {
      guard let text = value(name) else { return true }
      guard let number = Int(text) else { return false }
      target = number
      return true
    }
    guard integer(.w, into: &options.width), integer(.h, into: &options.height) else {
      return bad("w and h must be integers")
    }
    if let text = value(.scale) {
      guard let value = Double(text) else { return bad("scale must be a number") }
      options.scale = value
    }
    let priority: ImagePriority
    switch value(.priority) {
    case nil, "visible": priority = .visible
    case "normal": priority = .normal
    case "prefetch": priority = .prefetch
    default: return bad("priority must be visible, normal or prefetch")
    }
    if let text = value(.quality) {
      guard let value = Int(text) else { return bad("quality must be an integer") }
      options.quality = value
    }
    options.fit = value(.fit) ?? options.fit
    options.format = value(.format) ?? options.format
    options.colour = value(.colour) ?? options.colour
    for parameter in ThumbnailQuery.geometry {
      guard let text = value(parameter) else { continue }
      let arguments = text.split(separator: ":", omittingEmptySubsequences: false)
      if let problem = GeometryOptions.apply(
        parameter.rawValue[...], arguments[...], to: &options)
      {
        return bad(problem.message)
      }
    }
    let spec: ValidSpec
    let varies: [String]
    switch parameters.spec(options, of: request) {
    case .success(let checked): (spec, varies) = checked
    case .failure(let error): return bad(error.message)
    }
    let rev = value(.rev)
    if let rev, rev.isEmpty || rev.utf8.count > Wire.maxRevisionLength {
      return bad("rev must be 1 to \(Wire.maxRevisionLength) bytes")
    }
    return .request(ImageRequest(url: url, spec: spec, rev: rev), priority, varies: varies)
  }
}
