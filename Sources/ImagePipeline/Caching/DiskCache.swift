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
/// - One cache per directory: the directory is locked (`flock` on `lock`) for the cache's
///   lifetime, and a second cache on it, in this process or another, is refused
///   (`DiskCacheError.inUse`): two would each keep their own index, break the size limit and
///   sweep each other's temporary files.
/// - Writes go to a temporary file in the cache's own `tmp` folder and are renamed into place,
///   so readers see whole entries or none; leftovers of a killed writer are swept at start.
/// - Every entry carries its full key and a checksum, verified on read; an entry that is not a
///   regular file of the size the index recorded (a FIFO, a symlink, a sparse 4 GiB file) is
///   not even read: it is deleted and counted as corrupt, like a bad checksum.
/// - Faults are seen: each failed write and each corrupt entry is counted by kind and handed
///   to `onFault`; a full disk makes the cache evict its own entries and try once more, so it
///   keeps working inside whatever space there is.
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
    /// Entries evicted to respect the size limit (or to make room on a full disk).
    public var evictions: Int
    /// Writes that failed (full disk, permissions...).
    public var writeFailures: Int
    /// Faults by kind (`Fault.rawValue`), write failures and corruptions alike.
    public var faults: [String: Int]
    /// Seconds since the last fault (monotonic), nil when there was none.
    public var secondsSinceLastFault: Double?
  }

  /// What went wrong with the storage.
  public enum Fault: String, Sendable, CaseIterable {
    /// A write found no space left (ENOSPC, EDQUOT).
    case noSpace = "no_space"
    /// A write was refused (EACCES, EPERM, EROFS).
    case refused
    /// A write failed otherwise (EIO...).
    case writeFailed = "write_failed"
    /// An entry failed its checks (checksum, size, not a regular file) and was deleted.
    case corrupt
  }

  /// One fault, for a log line.
  public struct FaultReport: Sendable {
    /// The kind.
    public let fault: Fault
    /// The system's words, or what check failed.
    public let message: String
  }

  /// Where entries live.
  public nonisolated let directory: String
  /// Largest total size of entry files.
  public nonisolated let sizeLimit: Int
  /// What its files' names end with (`tdc`; another kind of entry, another ending).
  public nonisolated let fileExtension: String
  private nonisolated let executor = QueueExecutor(label: "thumbd.disk-cache")
  private nonisolated let lockDescriptor: Int32
  private let onFault: (@Sendable (FaultReport) -> Void)?
  private let index: MemoryCache<String, Int>
  private var lastFault: UInt64?
  private var stats = Statistics(
    count: 0, totalBytes: 0, hits: 0, misses: 0, corruptions: 0, evictions: 0, writeFailures: 0,
    faults: [:], secondsSinceLastFault: nil)

  /// Runs this actor on its own queue.
  public nonisolated var unownedExecutor: UnownedSerialExecutor {
    executor.asUnownedSerialExecutor()
  }

  /// Opens (creating if needed) a cache in `directory`, locks it, sweeps temporary leftovers
  /// and evicts down to `sizeLimit`; with `maxEntriesPerGroup` above 0, each group (the
  /// thumbnails of one source) keeps at most that many entries, oldest out first, on start
  /// too. Its files end in `.fileExtension` (another kind of entry in a cache of its own takes
  /// another). `onFault` hears of every storage fault, on the cache's
  /// queue.
  public init(
    directory: String, sizeLimit: Int, maxEntriesPerGroup: Int = 0,
    fileExtension: String = "tdc",
    onFault: (@Sendable (FaultReport) -> Void)? = nil
  ) throws(DiskCacheError) {
    self.fileExtension = fileExtension
    self.directory = directory
    self.sizeLimit = sizeLimit
    self.onFault = onFault
    index = MemoryCache(
      costLimit: sizeLimit, countLimit: Int.max, maxEntryFraction: 1,
      grouping: maxEntriesPerGroup > 0
        ? MemoryCache.Grouping(limit: maxEntriesPerGroup, group: DiskCacheEntry.group(ofName:))
        : nil)
    guard SystemFiles.makeDirectories(directory + "/tmp") else {
      throw .cannotOpen("cannot create \(directory)/tmp: \(SystemFiles.describe(errno))")
    }
    let lock = open(directory + "/lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard lock >= 0 else {
      throw .cannotOpen("cannot open \(directory)/lock: \(SystemFiles.describe(errno))")
    }
    guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
      close(lock)
      throw .inUse(directory)
    }
    lockDescriptor = lock
    // Only with the lock held: the temporary files are then no one else's.
    for leftover in SystemFiles.list(directory + "/tmp") ?? [] {
      unlink(directory + "/tmp/" + leftover)
    }
    var found: [(name: String, size: Int, modified: Double)] = []
    for shard in SystemFiles.list(directory) ?? [] where shard.count == 2 {
      for name in SystemFiles.list(directory + "/" + shard) ?? []
      where name.hasSuffix("." + fileExtension) {
        var info = stat()
        let file = directory + "/" + shard + "/" + name
        guard lstat(file, &info) == 0 else { continue }
        // Not ours: a FIFO, a symlink, a directory, a sparse file. Gone before anything reads it.
        guard (info.st_mode & S_IFMT) == S_IFREG, !Self.isSparse(info) else {
          if (info.st_mode & S_IFMT) != S_IFDIR { unlink(file) }
          stats.corruptions += 1
          stats.faults[Fault.corrupt.rawValue, default: 0] += 1
          onFault?(FaultReport(fault: .corrupt, message: "entry \(name): not a regular file"))
          continue
        }
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

  deinit { close(lockDescriptor) }

  /// The metadata and payload stored under `key` (in `group`, if it was stored in one), if
  /// present and intact.
  public func data(forKey key: String, group: String? = nil) -> (
    metadata: [UInt8], payload: [UInt8]
  )? {
    let name = DiskCacheEntry.fileName(for: key, group: group, extension: fileExtension)
    guard let size = index.peek(name) else {
      stats.misses += 1
      return nil
    }
    let bytes: [UInt8]
    switch readFile(path(for: name), size: size) {
    case .success(let read): bytes = read
    case .failure(.missing):
      index.removeValue(forKey: name)
      stats.misses += 1
      return nil
    case .failure(.unfit(let why)):
      discard(name, because: why)
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
      discard(name, because: "checksum or layout does not match")
      return nil
    }
  }

  /// Deletes a corrupt entry, counting the fault.
  private func discard(_ name: String, because why: String) {
    index.removeValue(forKey: name)
    unlink(path(for: name))
    stats.corruptions += 1
    stats.misses += 1
    record(.corrupt, "entry \(name): \(why)")
  }

  private func record(_ fault: Fault, _ message: String) {
    stats.faults[fault.rawValue, default: 0] += 1
    lastFault = Self.now()
    onFault?(FaultReport(fault: fault, message: message))
  }

  private static func now() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
  }

  /// Stores `payload` and `metadata` under `key`, atomically, evicting to the size limit.
  /// Failures are counted, reported to `onFault` and otherwise ignored: a cache may always
  /// forget. On a full disk the least recently used entries make room and the write is tried
  /// once more, so a limit above the free space does not freeze the cache.
  public func store(
    payload: [UInt8], metadata: [UInt8] = [], forKey key: String, group: String? = nil
  ) {
    let name = DiskCacheEntry.fileName(for: key, group: group, extension: fileExtension)
    let bytes = DiskCacheEntry.encode(key: key, metadata: metadata, payload: payload)
    guard bytes.count <= sizeLimit else { return }
    let shard = directory + "/" + String(name.prefix(2))
    mkdir(shard, 0o755)
    var failure = writeAtomically(bytes, to: path(for: name))
    if let error = failure, error.code == ENOSPC || error.code == EDQUOT {
      // Room for this entry and as much again, so a full disk costs one eviction per write.
      let target = max(0, index.statistics.totalCost - 2 * bytes.count - (64 << 10))
      for old in index.trim(toCost: target) {
        unlink(path(for: old))
        stats.evictions += 1
      }
      record(.noSpace, "\(error.message); evicted down to \(target) bytes")
      failure = writeAtomically(bytes, to: path(for: name))
    }
    if let error = failure {
      stats.writeFailures += 1
      switch error.code {
      case ENOSPC, EDQUOT: record(.noSpace, error.message)
      case EACCES, EPERM, EROFS: record(.refused, error.message)
      default: record(.writeFailed, error.message)
      }
      return
    }
    let (stored, evicted) = index.insert(bytes.count, forKey: name, cost: bytes.count)
    if !stored { unlink(path(for: name)) }
    for old in evicted {
      unlink(path(for: old))
      stats.evictions += 1
    }
  }

  /// Deletes the entry stored under `key` (in `group`), if any; whether there was one.
  @discardableResult
  public func removeValue(forKey key: String, group: String? = nil) -> Bool {
    let name = DiskCacheEntry.fileName(for: key, group: group, extension: fileExtension)
    guard index.peek(name) != nil else { return false }
    index.removeValue(forKey: name)
    unlink(path(for: name))
    return true
  }

  /// Deletes every entry stored in `group` and returns how many went. The names say which:
  /// no file is read.
  @discardableResult
  public func removeGroup(_ group: String) -> Int {
    let prefix = DiskCacheEntry.groupPrefix(group)
    var removed = 0
    for name in index.keysByRecency where name.hasPrefix(prefix) {
      index.removeValue(forKey: name)
      unlink(path(for: name))
      removed += 1
    }
    return removed
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
    current.secondsSinceLastFault = lastFault.map { Double(Self.now() &- $0) / 1e9 }
    return current
  }

  private nonisolated func path(for name: String) -> String {
    Self.path(for: name, in: directory)
  }

  private static func path(for name: String, in directory: String) -> String {
    directory + "/" + String(name.prefix(2)) + "/" + name
  }

  private enum ReadFailure: Error {
    case missing
    case unfit(String)
  }

  /// The entry file's bytes, if it is a regular file of the size the index recorded: opened
  /// without following a symlink and without blocking (a FIFO), checked before any read.
  private func readFile(_ path: String, size: Int) -> Result<[UInt8], ReadFailure> {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
    guard fd >= 0 else {
      return .failure(errno == ENOENT ? .missing : .unfit(SystemFiles.describe(errno)))
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { return .failure(.unfit(SystemFiles.describe(errno))) }
    guard (info.st_mode & S_IFMT) == S_IFREG else { return .failure(.unfit("not a regular file")) }
    guard Int(info.st_size) == size else {
      return .failure(.unfit("\(info.st_size) bytes where \(size) were written"))
    }
    guard !Self.isSparse(info) else { return .failure(.unfit("a sparse file")) }
    guard let bytes = FileIO.readAll(fd, expected: size), bytes.count == size else {
      return .failure(.unfit("short read"))
    }
    return .success(bytes)
  }

  /// Whether a file has far fewer blocks than bytes: entries are written whole, so holes mean
  /// someone else made it (a 4 GiB file of nothing would otherwise be read whole).
  private static func isSparse(_ info: stat) -> Bool {
    Int(info.st_blocks) * 512 + 65536 < Int(info.st_size)
  }

  private func writeAtomically(_ bytes: [UInt8], to destination: String) -> FileIO.WriteError? {
    do {
      try FileIO.writeAtomically(
        bytes, to: destination, temporaryTemplate: directory + "/tmp/entry-XXXXXX")
      return nil
    } catch {
      return error
    }
  }
}

/// Why a disk cache could not be opened.
public enum DiskCacheError: Error, Sendable, Hashable, CustomStringConvertible {
  /// Another cache (another thumbd) holds the directory's lock.
  case inUse(String)
  /// The directory or its lock file cannot be made.
  case cannotOpen(String)

  /// A sentence for the log.
  public var description: String {
    switch self {
    case .inUse(let directory):
      "the cache directory \(directory) is in use by another thumbd (or another cache in "
        + "this process); give each daemon a directory of its own"
    case .cannotOpen(let message): message
    }
  }
}
