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
