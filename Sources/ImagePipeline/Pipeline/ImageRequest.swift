/// What a consumer asks for: a source and the thumbnail to make of it, checked when it is
/// made (a `ValidSpec`), so nothing after checks again. Two equal requests share one decode;
/// requests with the same URL share one download.
public struct ImageRequest: Hashable, Sendable {
  /// The source URL (`http`, `https` or `file`), as the data loader understands it, in normal
  /// form (`SourceURL.normalized`): spellings of one source share its cache entries.
  public let url: String
  /// Size, scale, fit and format of the thumbnail, checked; its fields read through.
  public let spec: ValidSpec
  /// The content revision the consumer's model holds, if it knows one. Part of the cache key:
  /// a new revision is a new entry, rendered from the source as it is now (asked again even
  /// when the cached source is fresh), never from what an older revision saw.
  public var rev: String?

  /// Creates a request for a checked spec (`ValidSpec(spec)` checks one).
  public init(url: String, spec: ValidSpec, rev: String? = nil) {
    self.url = SourceURL.normalized(url)
    self.spec = spec
    self.rev = rev
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

/// The memory cache's answer to a request (`ThumbnailPipeline.lookup`).
public enum MemoryLookup: Sendable {
  /// What the cache holds for it: fresh, or stale while one revalidation starts.
  case hit(ImageResponse)
  /// Nothing to serve at once.
  case miss(MemoryMiss)
}

/// A request the memory cache could not answer when `ThumbnailPipeline.lookup` asked it: its
/// load (`response(after:)`, `task(after:)`) does not ask the cache again before its job.
public struct MemoryMiss: Sendable {
  /// What was looked up.
  public let request: ImageRequest
}
