/// Which content of a source a cache entry was made from, and how long it may be served
/// without asking the source again. Every memory and disk entry carries one.
public struct SourceVersion: Sendable, Hashable {
  /// What identifies the content: a file's stamp, or an origin's validators.
  public var validator: SourceValidator
  /// A digest of the source bytes: two responses with equal validators and digests hold the
  /// same picture, so a 200 that sends the same bytes again needs no decode.
  public var digest: UInt64
  /// When and how the entry may be served.
  public var freshness: Freshness
  /// Seconds since 1970 of the source's last change (a file's mtime or `Last-Modified`).
  public var lastModified: Double?

  /// Creates a version.
  public init(
    validator: SourceValidator, digest: UInt64, freshness: Freshness, lastModified: Double? = nil
  ) {
    self.validator = validator
    self.digest = digest
    self.freshness = freshness
    self.lastModified = lastModified
  }

  /// A version for loaders that know none (test doubles, embedded sources): never stale,
  /// never changed.
  public static func unversioned(digest: UInt64 = 0) -> SourceVersion {
    SourceVersion(validator: .none, digest: digest, freshness: .forever)
  }

  /// Whether `other` holds the same content (freshness aside).
  public func sameContent(as other: SourceVersion) -> Bool {
    validator == other.validator && digest == other.digest
  }

  /// This version with the freshness of a revalidation's answer; the validators the answer
  /// carries replace the ones it omits only where it sent them.
  public func renewed(by answer: SourceVersion) -> SourceVersion {
    var renewed = self
    renewed.freshness = answer.freshness
    if case .http(let etag, let modified) = answer.validator,
      case .http(let oldTag, let oldModified) = validator
    {
      renewed.validator = .http(etag: etag ?? oldTag, lastModified: modified ?? oldModified)
    }
    renewed.lastModified = answer.lastModified ?? lastModified
    return renewed
  }
}

/// What identifies one content of a source.
public enum SourceValidator: Sendable, Hashable {
  /// Nothing: the loader cannot tell versions apart.
  case none
  /// A local file, by the `fstat` of the descriptor its bytes were read from.
  case file(FileStamp)
  /// An origin's validators, as sent (either may be missing).
  case http(etag: String?, lastModified: String?)

  /// Whether a conditional request can be made with it.
  public var canRevalidate: Bool {
    if case .http(let etag, let modified) = self { return etag != nil || modified != nil }
    return false
  }
}

/// A file's identity and change stamps. Any difference means the file may hold other bytes:
/// a rewrite changes the size or times, a rename over the path changes the inode, and a
/// `touch -d` that restores the mtime still moves the ctime, which no user can set.
public struct FileStamp: Sendable, Hashable {
  /// `st_dev`.
  public var device: UInt64
  /// `st_ino`.
  public var inode: UInt64
  /// `st_size`.
  public var size: Int64
  /// `st_mtim` in nanoseconds since 1970.
  public var modifiedNanoseconds: Int64
  /// `st_ctim` in nanoseconds since 1970.
  public var changedNanoseconds: Int64

  /// Creates a stamp.
  public init(
    device: UInt64, inode: UInt64, size: Int64, modifiedNanoseconds: Int64,
    changedNanoseconds: Int64
  ) {
    self.device = device
    self.inode = inode
    self.size = size
    self.modifiedNanoseconds = modifiedNanoseconds
    self.changedNanoseconds = changedNanoseconds
  }
}

/// How long an entry may be served, as RFC 9111 computes it from the origin's answer and the
/// configured bounds (`FreshnessRules`).
public struct Freshness: Sendable, Hashable {
  /// Seconds since 1970 until which the entry is fresh; infinite for sources checked on
  /// every request (files) and for unversioned ones.
  public var freshUntil: Double
  /// The lifetime the answer gave, in seconds: what a 304 that carries no freshness of its
  /// own renews, and what a file source advertises downstream.
  public var lifetime: Double
  /// Seconds past `freshUntil` a stale entry may still be served while one revalidation runs.
  public var staleWhileRevalidate: Double
  /// Seconds past `freshUntil` a stale entry may be served when the origin fails.
  public var staleIfError: Double
  /// Kept only for the requests that share it: never in the memory or disk cache.
  public var noStore: Bool
  /// For one user: thumbd, a shared cache, keeps it like `noStore`, and says `private`.
  public var isPrivate: Bool

  /// Creates a freshness.
  public init(
    freshUntil: Double, lifetime: Double, staleWhileRevalidate: Double = 0,
    staleIfError: Double = 0, noStore: Bool = false, isPrivate: Bool = false
  ) {
    self.freshUntil = freshUntil
    self.lifetime = lifetime
    self.staleWhileRevalidate = staleWhileRevalidate
    self.staleIfError = staleIfError
    self.noStore = noStore
    self.isPrivate = isPrivate
  }

  /// Never stale (lifetime: one day, for what is advertised downstream).
  public static let forever = Freshness(freshUntil: .infinity, lifetime: 86_400)

  /// Whether no cache of thumbd may keep it.
  public var mayStore: Bool { !noStore && !isPrivate }

  /// Seconds a downstream cache may keep a response made now, at `now` (never negative).
  public func remaining(now: Double) -> Double {
    freshUntil.isInfinite ? lifetime : max(0, freshUntil - now)
  }
}
