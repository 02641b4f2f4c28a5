/// The newest version the pipeline knows of each source, so a revalidation renews every cached
/// size at once and a change retires them all. Bounded: past `capacity` the least recently
/// used are forgotten, and a thumbnail whose source is forgotten is judged by the version it
/// carries (the one it was made from), which is never fresher than the truth.
final class SourceCatalog: Sendable {
  private let versions: MemoryCache<String, SourceVersion>

  init(capacity: Int) {
    versions = MemoryCache(costLimit: Int.max, countLimit: capacity, maxEntryFraction: 1)
  }

  /// The newest known version of `url`.
  func version(of url: String) -> SourceVersion? { versions.value(forKey: url) }

  /// Records `version` as the newest of `url`.
  func record(_ version: SourceVersion, for url: String) {
    versions.setValue(version, forKey: url, cost: 1)
  }

  /// Forgets `url`.
  func forget(_ url: String) { versions.removeValue(forKey: url) }
}

/// Whether a cached entry may be served as it is.
enum SourceVerdict: Sendable {
  /// Current and fresh: serve it with this (possibly renewed) version.
  case fresh(SourceVersion)
  /// Current as far as is known, but past its freshness: ask the source first.
  case stale(SourceVersion)
  /// The source holds other content now: drop every entry made from it.
  case changed
  /// Made from an older version than the newest known, whose change was already handled:
  /// drop this entry only.
  case superseded
}
