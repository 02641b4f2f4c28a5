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
    var carrying = thumbnail
    if carrying.placeholder == nil { carrying.placeholder = Placeholder(decoding: thumbnail) }
    guard let placeholder = carrying.placeholder else { return nil }
    recordPlaceholder(
      of: carrying, for: ImageRequest(url: url, spec: .init(width: 1, height: 1), rev: rev))
    return placeholders.placeholder(url: url, rev: rev) ?? placeholder
  }

  /// Keeps the placeholder a new thumbnail of `request` carries, unless one is known for its
  /// source and revision already (a source keeps one look until it changes, which forgets
  /// it): in memory at once, on disk behind delivery.
  func recordPlaceholder(of thumbnail: Thumbnail, for request: ImageRequest) {
    // A source that may not be stored leaves no trace, its look included.
    guard let placeholder = thumbnail.placeholder, thumbnail.source.freshness.mayStore,
      placeholders.placeholder(url: request.url, rev: request.rev) == nil
    else { return }
    placeholders.record(placeholder, url: request.url, rev: request.rev)
    guard let disk = configuration.placeholderCache else { return }
    let dropped = !diskWrites.schedule {
      await disk.store(
        payload: placeholder.encoded,
        forKey: PlaceholderIndex.diskKey(url: request.url, rev: request.rev),
        group: PlaceholderIndex.diskGroup(url: request.url))
    }
    if dropped { metrics.countDiskWriteSkipped() }
  }
}
