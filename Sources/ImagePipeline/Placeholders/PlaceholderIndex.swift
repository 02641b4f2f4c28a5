/// The placeholders the pipeline knows, per source and revision: in memory (bounded by count
/// and bytes, which the memory budget counts) and, when the pipeline has a placeholder cache
/// (a small `DiskCache` of its own, `placeholders/` in the cache directory), on disk under a
/// group per source, so they survive restarts and a purge or a changed source takes them with
/// the thumbnails.
public final class PlaceholderIndex: Sendable {
  /// A source and the revision a placeholder was made for.
  struct Key: Hashable, Sendable {
    let url: String
    let rev: String?
  }

  private let memory: MemoryCache<Key, Placeholder>

  /// At most `countLimit` placeholders, `costLimit` bytes, in memory.
  public init(countLimit: Int = 65_536, costLimit: Int = 8 << 20) {
    memory = MemoryCache(costLimit: costLimit, countLimit: countLimit, maxEntryFraction: 1)
  }

  /// Bytes held in memory (keys and hashes), for the memory budget.
  public var totalCost: Int { memory.statistics.totalCost }

  /// Placeholders held in memory.
  public var count: Int { memory.statistics.count }

  func record(_ placeholder: Placeholder, url: String, rev: String?) {
    memory.setValue(
      placeholder, forKey: Key(url: url, rev: rev),
      cost: 96 + url.utf8.count + (rev?.utf8.count ?? 0) + placeholder.thumbHash.count)
  }

  func placeholder(url: String, rev: String?) -> Placeholder? {
    memory.value(forKey: Key(url: url, rev: rev))
  }

  func forget(url: String) { memory.removeAll { $0.url == url } }

  /// The placeholder cache's key and group for a placeholder: every revision of one source in
  /// one group (bounded like a source's variants, and a purge takes them all).
  static func diskKey(url: String, rev: String?) -> String {
    "placeholder|" + (rev.map { "+\($0.utf8.count):\($0)" } ?? "-") + "|" + url
  }

  static func diskGroup(url: String) -> String { "placeholder|" + url }
}

extension ThumbnailPipeline {
  /// The placeholder known in memory for `url` at `rev`: at once, no I/O.
  public func placeholder(for url: String, rev: String? = nil) -> Placeholder? {
    placeholders.placeholder(url: url, rev: rev)
  }

  /// The placeholder known for `url` at `rev`, in memory or on disk (read back into memory).
  public func storedPlaceholder(for url: String, rev: String? = nil) async -> Placeholder? {
    if let known = placeholders.placeholder(url: url, rev: rev) { return known }
    guard let disk = configuration.placeholderCache,
      let entry = await disk.data(
        forKey: PlaceholderIndex.diskKey(url: url, rev: rev),
        group: PlaceholderIndex.diskGroup(url: url)),
      let stored = Placeholder(encoded: entry.payload)
    else { return nil }
    placeholders.record(stored, url: url, rev: rev)
    return stored
  }

  /// The placeholder of `thumbnail` (of `url` at `rev`), its own or made from its bytes, kept
  /// as a rendered one's would be; nil when it has none and does not decode.
  public func keepPlaceholder(decoding thumbnail: Thumbnail, url: String, rev: String?)
    -> Placeholder?
  {
    guard let placeholder = thumbnail.placeholder ?? Placeholder(decoding: thumbnail) else {
      return nil
    }
    record(placeholder, of: thumbnail.source, url: url, rev: rev)
    return placeholders.placeholder(url: url, rev: rev) ?? placeholder
  }

  /// Keeps the placeholder a new thumbnail of `request` carries.
  func recordPlaceholder(of thumbnail: Thumbnail, for request: ImageRequest) {
    guard let placeholder = thumbnail.placeholder else { return }
    record(placeholder, of: thumbnail.source, url: request.url, rev: request.rev)
  }

  /// Keeps `placeholder` for `url` at `rev` unless one is known already (a source keeps one
  /// look until it changes, which forgets it): in memory at once, on disk behind delivery.
  private func record(
    _ placeholder: Placeholder, of source: SourceVersion, url: String, rev: String?
  ) {
    // A source that may not be stored leaves no trace, its look included.
    guard source.freshness.mayStore, placeholders.placeholder(url: url, rev: rev) == nil else {
      return
    }
    placeholders.record(placeholder, url: url, rev: rev)
    guard let disk = configuration.placeholderCache else { return }
    let dropped = !diskWrites.schedule {
      await disk.store(
        payload: placeholder.encoded, forKey: PlaceholderIndex.diskKey(url: url, rev: rev),
        group: PlaceholderIndex.diskGroup(url: url))
    }
    if dropped { metrics.countDiskWriteSkipped() }
  }
}
