/// The placeholders the pipeline knows, per source and revision, each with the version of the
/// source it was made from: in memory (bounded by count and bytes, which the memory budget
/// counts) and, when the pipeline has a placeholder cache (a small `DiskCache` of its own,
/// `placeholders/` in the cache directory), on disk under a group per source, so they survive
/// restarts and a purge or a changed source takes them with the thumbnails. A placeholder is
/// judged against its source on every lookup, as a thumbnail is: a file rewritten in place, or
/// an origin's newer content, makes it unknown, whatever asked first.
public final class PlaceholderIndex: Sendable {
  /// A source and the revision a placeholder was made for.
  struct Key: Hashable, Sendable {
    let url: String
    let rev: String?
  }

  /// A placeholder and the version of its source it shows.
  struct Known: Sendable {
    let placeholder: Placeholder
    let source: SourceVersion
  }

  private let memory: MemoryCache<Key, Known>

  /// At most `countLimit` placeholders, `costLimit` bytes, in memory.
  public init(countLimit: Int = 65_536, costLimit: Int = 8 << 20) {
    memory = MemoryCache(costLimit: costLimit, countLimit: countLimit, maxEntryFraction: 1)
  }

  /// Bytes held in memory (keys, versions and hashes), for the memory budget.
  public var totalCost: Int { memory.statistics.totalCost }

  /// Placeholders held in memory.
  public var count: Int { memory.statistics.count }

  func record(_ known: Known, url: String, rev: String?) {
    memory.setValue(
      known, forKey: Key(url: url, rev: rev),
      cost: 224 + url.utf8.count + (rev?.utf8.count ?? 0) + known.placeholder.thumbHash.count)
  }

  func known(url: String, rev: String?) -> Known? {
    memory.value(forKey: Key(url: url, rev: rev))
  }

  func forget(url: String, rev: String?) { memory.removeValue(forKey: Key(url: url, rev: rev)) }

  func forget(url: String) { memory.removeAll { $0.url == url } }

  /// The placeholder cache's key and group for a placeholder: every revision of one source in
  /// one group (bounded like a source's variants, and a purge takes them all).
  static func diskKey(url: String, rev: String?) -> String {
    "placeholder|" + (rev.map { "+\($0.utf8.count):\($0)" } ?? "-") + "|" + url
  }

  static func diskGroup(url: String) -> String { "placeholder|" + url }
}

extension ThumbnailPipeline {
  /// The placeholder known in memory for `url` at `rev`, while the source still holds what it
  /// was made from: a file is `stat`ed after `received` (shared within a pass, as a memory
  /// hit's is), an origin's is judged by the newest version known and its freshness. nil
  /// otherwise; one made from content the source no longer holds is forgotten. No other I/O.
  public func placeholder(
    for url: String, rev: String? = nil, received: ContinuousClock.Instant = .now
  ) -> Placeholder? {
    guard let known = placeholders.known(url: url, rev: rev) else { return nil }
    return current(known, url: url, rev: rev, received: received)
  }

  /// The placeholder to name beside `thumbnail` (of `url` at `rev`, just judged current): the
  /// one known for the same content, so every size shows one look, else the thumbnail's own,
  /// else one made from its pixels (a disk hit carries none, and the one known may be of
  /// another version of a file rewritten meanwhile). Never one of other content.
  public func placeholder(for url: String, rev: String?, of thumbnail: Thumbnail) -> Placeholder? {
    if let known = placeholders.known(url: url, rev: rev),
      known.source.sameContent(as: thumbnail.source)
    {
      return known.placeholder
    }
    return thumbnail.placeholder ?? Placeholder(decoding: thumbnail)
  }

  /// The placeholder known for `url` at `rev`, in memory or on disk (read back into memory),
  /// judged against the source as `placeholder(for:rev:received:)` judges.
  public func storedPlaceholder(
    for url: String, rev: String? = nil, received: ContinuousClock.Instant = .now
  ) async -> Placeholder? {
    if let known = placeholders.known(url: url, rev: rev) {
      return current(known, url: url, rev: rev, received: received)
    }
    guard let disk = configuration.placeholderCache,
      let entry = await disk.data(
        forKey: PlaceholderIndex.diskKey(url: url, rev: rev),
        group: PlaceholderIndex.diskGroup(url: url)),
      let stored = Placeholder(encoded: entry.payload),
      // An entry without the version it shows (or with one that does not read) is no answer.
      let decoded = SourceVersionCoding.decode(entry.metadata[...]),
      decoded.length == entry.metadata.count
    else { return nil }
    let known = PlaceholderIndex.Known(placeholder: stored, source: decoded.version)
    guard let placeholder = current(known, url: url, rev: rev, received: received) else {
      return nil
    }
    if placeholders.known(url: url, rev: rev) == nil {
      placeholders.record(known, url: url, rev: rev)
    }
    return placeholder
  }

  /// `known`'s placeholder when its source still holds what it shows; else nil, and a changed
  /// or superseded one is forgotten (a stale origin's stays, for a revalidation to renew).
  private func current(
    _ known: PlaceholderIndex.Known, url: String, rev: String?, received: ContinuousClock.Instant
  ) -> Placeholder? {
    switch verdict(for: url, stored: known.source, received: received) {
    case .fresh: return known.placeholder
    case .stale: return nil
    case .changed, .superseded:
      placeholders.forget(url: url, rev: rev)
      return nil
    }
  }

  /// The placeholder of `thumbnail` (of `url` at `rev`), its own or made from its bytes, kept
  /// as a rendered one's would be; nil when it has none and does not decode.
  public func keepPlaceholder(decoding thumbnail: Thumbnail, url: String, rev: String?)
    -> Placeholder?
  {
    guard let made = thumbnail.placeholder ?? Placeholder(decoding: thumbnail) else { return nil }
    record(made, of: thumbnail.source, url: url, rev: rev)
    var shown = thumbnail
    shown.placeholder = made
    return placeholder(for: url, rev: rev, of: shown)
  }

  /// Keeps the placeholder a new thumbnail of `request` carries.
  func recordPlaceholder(of thumbnail: Thumbnail, for request: ImageRequest) {
    guard let placeholder = thumbnail.placeholder else { return }
    record(placeholder, of: thumbnail.source, url: request.url, rev: request.rev)
  }

  /// Keeps `placeholder` of `source` for `url` at `rev`: in memory at once, on disk behind
  /// delivery. A source keeps one look while its content stays (the one known for it is kept),
  /// and an older picture's look never replaces a newer one's: a placeholder of other content
  /// than the newest version known is not kept.
  private func record(
    _ placeholder: Placeholder, of source: SourceVersion, url: String, rev: String?
  ) {
    // A source that may not be stored leaves no trace, its look included.
    guard source.freshness.mayStore else { return }
    if let known = placeholders.known(url: url, rev: rev), known.source.sameContent(as: source) {
      return
    }
    if let newest = sources.version(of: url), !newest.sameContent(as: source) { return }
    placeholders.record(.init(placeholder: placeholder, source: source), url: url, rev: rev)
    guard let disk = configuration.placeholderCache else { return }
    let dropped = !diskWrites.schedule {
      await disk.store(
        payload: placeholder.encoded, metadata: SourceVersionCoding.encode(source),
        forKey: PlaceholderIndex.diskKey(url: url, rev: rev),
        group: PlaceholderIndex.diskGroup(url: url))
    }
    if dropped { metrics.countDiskWriteSkipped() }
  }
}
