/// What a consumer asks for: a source and the thumbnail to make of it. Two equal requests share
/// one decode; requests with the same URL share one download.
public struct ImageRequest: Hashable, Sendable {
  /// The source URL (`http`, `https` or `file`), as the data loader understands it, in normal
  /// form (`SourceURL.normalized`): spellings of one source share its cache entries.
  public var url: String {
    didSet { url = SourceURL.normalized(url) }
  }
  /// Size, scale, fit and format of the thumbnail.
  public var spec: ThumbnailSpec {
    didSet { checked = nil }
  }
  /// The content revision the consumer's model holds, if it knows one. Part of the cache key:
  /// a new revision is a new entry, rendered from the source as it is now (asked again even
  /// when the cached source is fresh), never from what an older revision saw.
  public var rev: String?
  /// `spec`, when it came checked (`init(url:spec:rev:)` with a `ValidSpec`): the pipeline then
  /// checks nothing again. Not part of the request's identity.
  private var checked: ValidSpec?

  /// Creates a request; the pipeline checks `spec` when it starts.
  public init(url: String, spec: ThumbnailSpec, rev: String? = nil) {
    self.url = SourceURL.normalized(url)
    self.spec = spec
    self.rev = rev
  }

  /// Creates a request for a spec already checked.
  public init(url: String, spec: ValidSpec, rev: String? = nil) {
    self.init(url: url, spec: spec.spec, rev: rev)
    checked = spec
  }

  /// The spec, checked: as it came, or checked now.
  func validSpec() throws(ThumbnailError) -> ValidSpec {
    if let checked { return checked }
    return try ValidSpec(spec)
  }

  /// Equal when the URL, spec and revision are: whether the spec came checked does not count.
  public static func == (lhs: ImageRequest, rhs: ImageRequest) -> Bool {
    lhs.url == rhs.url && lhs.spec == rhs.spec && lhs.rev == rhs.rev
  }

  /// Hashes the URL, spec and revision (what `==` compares).
  public func hash(into hasher: inout Hasher) {
    hasher.combine(url)
    hasher.combine(spec)
    hasher.combine(rev)
  }
}

/// Where a response came from.
public enum ResponseSource: String, Sendable, Hashable {
  /// The memory cache.
  case memory
  /// The disk cache.
  case disk
  /// New work started by this request.
  case miss
  /// Work another request had started, joined in flight.
  case coalesced
  /// A cached entry the origin confirmed unchanged (a 304, or the same bytes again).
  case revalidated
  /// A stale entry, served because the origin failed (`stale_if_error`) or while it is asked
  /// again (`stale_while_revalidate`).
  case stale
}

/// A thumbnail and where it came from.
public struct ImageResponse: Sendable, Hashable {
  /// The encoded thumbnail.
  public var thumbnail: Thumbnail
  /// Memory, disk, miss or coalesced.
  public var source: ResponseSource

  /// Creates a response.
  public init(thumbnail: Thumbnail, source: ResponseSource) {
    self.thumbnail = thumbnail
    self.source = source
  }
}
