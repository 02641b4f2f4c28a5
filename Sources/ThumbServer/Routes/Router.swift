import ImagePipeline
import Synchronization

/// Maps requests to answers through one table of routes, all given by the composition root
/// (`Daemon`: `/v1/thumbnail`, `/healthz`, `/metrics`, the session path's 426, and the rest),
/// and counts responses by status for `/metrics`. Socket handling lives elsewhere: this type
/// only sees parsed requests.
public final class Router: Sendable {
  /// Responses counted by status and format, which `MetricsRoute` reports.
  public let statuses: StatusCounts
  /// The route table: every route by path (a later route for a path replaces an earlier).
  private let routes: [String: Route]
  /// The imgproxy path form, for targets no route names.
  public let paths: SignedPathRoute?

  /// Creates a router answering `routes`, then `paths` for targets no route names, counting
  /// responses into `statuses`.
  public init(
    routes: [Route], paths: SignedPathRoute? = nil, statuses: StatusCounts = StatusCounts()
  ) {
    self.paths = paths
    self.statuses = statuses
    self.routes = Dictionary(routes.map { ($0.path, $0) }) { _, later in later }
  }

  /// Reads the request once and answers it: at once when no waiting is needed, else with the
  /// work to wait for. Counted by status when the response is known.
  public func answer(_ request: HTTPRequest) -> RouteAnswer { counted(route(request)) }

  /// `answer`, counted by status when the response is known (also for an answer a kept
  /// response's reuse gave).
  func counted(_ answer: RouteAnswer) -> RouteAnswer {
    switch answer {
    case .now(let response, let source):
      statuses.count(response)
      return .now(response, source)
    case .later(let work):
      return .later { [self] in
        let (response, source) = await work()
        statuses.count(response)
        return (response, source)
      }
    }
  }

  /// Answers one request, waiting for it if needed.
  public func respond(to request: HTTPRequest) async -> (HTTPResponse, ResponseSource?) {
    switch answer(request) {
    case .now(let response, let source): return (response, source)
    case .later(let work): return await work()
    }
  }

  /// Counts a response the router did not make (a 400 for an unparsable request).
  public func count(_ status: Int) { statuses.count(status) }

  /// Counts a kept response given again (`ReadyResponses`): its status, and its thumbnail's
  /// format.
  func count(_ status: Int, format: ImageFormat?) { statuses.count(status, format: format) }

  /// The request headers the route for `request` reads (`Route.reads`; the path form's for a
  /// target no route names), or nil when no route answers it.
  func reads(for request: HTTPRequest) -> Set<String>? {
    if let route = routes[request.path] { return route.reads }
    return paths?.reads
  }

  private func route(_ request: HTTPRequest) -> RouteAnswer {
    guard let route = routes[request.path] else {
      if let paths, let answer = paths.answer(request.seeing(paths.reads)) { return answer }
      return .now(.error(404, kind: "not_found", message: "no such endpoint"), nil)
    }
    guard route.methods.contains(request.method) else {
      let allowed = route.methods.sorted().joined(separator: ", ")
      var response = HTTPResponse.error(
        405, kind: "method_not_allowed", message: "use \(allowed)")
      response.headers.append(("Allow", allowed))
      return .now(response, nil)
    }
    return route.answer(request.seeing(route.reads))
  }
}

/// Responses by status, and thumbnails by image format, for `/metrics`. Every response is
/// counted, memory hits from every event loop included, so the counts are atomics in fixed
/// places (one per status 100...599 and per written format), not a dictionary behind a lock.
public final class StatusCounts: Sendable {
  private static let statusRange = 100..<600
  private let statuses: InlineArray<500, Atomic<Int>>
  private let written: InlineArray<4, Atomic<Int>>
  /// Anything else: statuses outside the range, image types thumbd does not write.
  private let others = Mutex<(statuses: [Int: Int], formats: [String: Int])>(([:], [:]))

  /// Counts a response of `status` with no image.
  func count(_ status: Int) { count(status, format: nil) }

  /// Counts a response's status and, for an image, its format (a 304 names none).
  func count(_ response: HTTPResponse) {
    guard response.status == 200, let name = response.imageFormat else {
      return count(response.status, format: nil)
    }
    guard let format = ImageFormat(rawValue: name) else {
      count(response.status, format: nil)
      return others.withLock { $0.formats[name, default: 0] += 1 }
    }
    count(200, format: format)
  }

  /// Counts a response of `status`, and a thumbnail of `format` when it carried one.
  func count(_ status: Int, format: ImageFormat?) {
    if Self.statusRange.contains(status) {
      statuses[status - Self.statusRange.lowerBound].add(1, ordering: .relaxed)
    } else {
      others.withLock { $0.statuses[status, default: 0] += 1 }
    }
    guard let format else { return }
    if let index = ImageFormat.allCases.firstIndex(of: format), index < written.count {
      written[index].add(1, ordering: .relaxed)
    } else {
      // A format added without a place here is counted all the same.
      others.withLock { $0.formats[format.rawValue, default: 0] += 1 }
    }
  }

  /// Counts for the router alone.
  public init() {
    statuses = InlineArray { _ in Atomic(0) }
    written = InlineArray { _ in Atomic(0) }
  }

  /// Responses so far by status, those never given left out.
  var snapshot: [Int: Int] {
    var counts = others.withLock { $0.statuses }
    for index in statuses.indices {
      let count = statuses[index].load(ordering: .relaxed)
      if count > 0 { counts[Self.statusRange.lowerBound + index] = count }
    }
    return counts
  }

  /// Thumbnails sent so far by format name, those never sent left out.
  var formats: [String: Int] {
    var counts = others.withLock { $0.formats }
    for (index, format) in ImageFormat.allCases.enumerated() where index < written.count {
      let count = written[index].load(ordering: .relaxed)
      if count > 0 { counts[format.rawValue] = count }
    }
    return counts
  }
}
