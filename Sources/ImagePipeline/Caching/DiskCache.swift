import Dispatch
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// A size-bounded, crash-safe disk cache of byte blobs with small metadata.
///
/// - The size limit always holds: eviction is least-recently-used from an index the cache
///   keeps itself (file access times are unreliable under relatime). Each hit stamps the file's
///   mtime, so the order survives a restart, when the index is rebuilt from a directory scan.
/// - Writes go to a temporary file in the cache's own `tmp` folder and are renamed into place,
///   so readers see whole entries or none; leftovers of a killed writer are swept at start.
/// - Every entry carries its full key and a checksum, verified on read; a corrupt entry is
///   deleted and counted as a miss.
/// - The actor runs on its own serial queue, so file I/O never blocks the cooperative pool.
public actor DiskCache {
  /// Totals since the cache was opened.
  public struct Statistics: Sendable, Hashable {
    /// Entries on disk.
    public var count: Int
    /// Bytes on disk (entry files).
    public var totalBytes: Int
    /// Lookups answered.
    public var hits: Int
    /// Lookups not answered (absent or corrupt).
    public var misses: Int
    /// Entries found corrupt and deleted.
    public var corruptions: Int
    /// Entries evicted to respect the size limit.
    public var evictions: Int
    /// Writes that failed (full disk, permissions...).
    public var writeFailures: Int
  }

  /// Where entries live.
  public nonisolated let directory: String
  /// Largest total size of entry files.
  public nonisolated let sizeLimit: Int
  private nonisolated let executor = QueueExecutor(label: "thumbd.disk-cache")
  private let index: MemoryCache<String, Int>
  private var stats = Statistics(
    count: 0, totalBytes: 0, hits: 0, misses: 0, corruptions: 0, evictions: 0, writeFailures: 0)

  /// Runs this actor on its own queue.
  public nonisolated var unownedExecutor: UnownedSerialExecutor {
    executor.asUnownedSerialExecutor()
  }

  /// Opens (creating if needed) a cache in `directory`, sweeping temporary leftovers and
  /// evicting down to `sizeLimit`.
  public init(directory: String, sizeLimit: Int) throws {
    self.directory = directory
    self.sizeLimit = sizeLimit
    index = MemoryCache(costLimit: sizeLimit, countLimit: Int.max, maxEntryFraction: 1)
    guard SystemFiles.makeDirectories(directory + "/tmp") else {
      throw FileIO.WriteError(
        message: "cannot create \(directory)/tmp: \(SystemFiles.describe(errno))")
    }
    for leftover in SystemFiles.list(directory + "/tmp") ?? [] {
      unlink(directory + "/tmp/" + leftover)
    }
    var found: [(name: String, size: Int, modified: Double)] = []
    for shard in SystemFiles.list(directory) ?? [] where shard.count == 2 {
      for name in SystemFiles.list(directory + "/" + shard) ?? []
      where name.hasSuffix("." + DiskCacheEntry.fileExtension) {
        var info = stat()
        guard stat(directory + "/" + shard + "/" + name, &info) == 0 else { continue }
        let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        found.append((name, Int(info.st_size), modified))
      }
    }
    // Oldest first, so the most recently used ends up at the head of the index.
    for file in found.sorted(by: { $0.modified < $1.modified }) {
      let (stored, evicted) = index.insert(file.size, forKey: file.name, cost: file.size)
      if !stored { unlink(Self.path(for: file.name, in: directory)) }
      for name in evicted { unlink(Self.path(for: name, in: directory)) }
    }
  }

  /// The metadata and payload stored under `key`, if present and intact.
  public func data(forKey key: String) -> (metadata: [UInt8], payload: [UInt8])? {
    let name = DiskCacheEntry.fileName(for: key)
    guard index.contains(name), let bytes = readFile(path(for: name)) else {
      stats.misses += 1
      return nil
    }
    switch DiskCacheEntry.decode(bytes, key: key) {
    case .entry(let metadata, let payload):
      _ = index.value(forKey: name)
      utimensat(AT_FDCWD, path(for: name), nil, 0)  // record the use for the next start
      stats.hits += 1
      return (metadata, payload)
    case .otherKey:
      stats.misses += 1
      return nil
    case .corrupt:
      index.removeValue(forKey: name)
      unlink(path(for: name))
      stats.corruptions += 1
      stats.misses += 1
      return nil
    }
  }

  /// Stores `payload` and `metadata` under `key`, atomically, evicting to the size limit.
  /// Failures (a full disk) are counted and otherwise ignored: a cache may always forget.
  public func store(payload: [UInt8], metadata: [UInt8] = [], forKey key: String) {
    let name = DiskCacheEntry.fileName(for: key)
    let bytes = DiskCacheEntry.encode(key: key, metadata: metadata, payload: payload)
    guard bytes.count <= sizeLimit else { return }
    let shard = directory + "/" + String(name.prefix(2))
    mkdir(shard, 0o755)
    guard writeAtomically(bytes, to: path(for: name)) else {
      stats.writeFailures += 1
      return
    }
    let (stored, evicted) = index.insert(bytes.count, forKey: name, cost: bytes.count)
    if !stored { unlink(path(for: name)) }
    for old in evicted {
      unlink(path(for: old))
      stats.evictions += 1
    }
  }

  /// Deletes every entry.
  public func removeAll() {
    for name in index.keysByRecency { unlink(path(for: name)) }
    index.removeAll()
  }

  /// Current totals.
  public var statistics: Statistics {
    var current = stats
    let totals = index.statistics
    current.count = totals.count
    current.totalBytes = totals.totalCost
    return current
  }

  private nonisolated func path(for name: String) -> String {
    Self.path(for: name, in: directory)
  }

  private static func path(for name: String, in directory: String) -> String {
    directory + "/" + String(name.prefix(2)) + "/" + name
  }

  private func readFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { return nil }
    return FileIO.readAll(fd, expected: Int(info.st_size))
  }

  private func writeAtomically(_ bytes: [UInt8], to destination: String) -> Bool {
    do {
      try FileIO.writeAtomically(
        bytes, to: destination, temporaryTemplate: directory + "/tmp/entry-XXXXXX")
      return true
    } catch {
      return false
    }
  }
}
