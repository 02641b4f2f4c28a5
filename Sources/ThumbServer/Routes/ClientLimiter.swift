import ImagePipeline
import Synchronization

/// Limits per client on the TCP listener: each client's misses (requests the memory cache
/// cannot answer, so that fetch, decode or read the disk) draw from a token bucket of `burst`
/// tokens refilled at `rate` a second; an empty bucket is answered 429 with `Retry-After`.
/// Memory hits are never charged.
///
/// A client is its peer address, or, when the peer is a trusted proxy (`trusted_proxies`), the
/// nearest address in `X-Forwarded-For` that is not one. On the Unix socket only forwarded requests
/// (a proxy such as nginx in front) are limited, by that address. IPv6 clients are counted by /64,
/// the block one host is usually given, so walking its addresses buys nothing. At most `maxClients`
/// buckets are kept: idle ones (full again) go first.
public final class ClientLimiter: Sendable {
  /// Tokens added per second.
  public let rate: Double
  /// Tokens a bucket holds when full: the misses a quiet client may send at once.
  public let burst: Double
  /// Peers whose `X-Forwarded-For` names the client.
  public let trustedProxies: [IPNetwork]
  /// The most buckets kept.
  public let maxClients: Int
  private let buckets = Mutex<[IPAddress: Bucket]>([:])
  private let refusals = Atomic<Int>(0)

  private struct Bucket {
    var tokens: Double
    var updated: ContinuousClock.Instant
  }

  /// A limiter of `rate` misses a second, bursts of `burst`, per client.
  public init(rate: Double, burst: Int, trustedProxies: [IPNetwork], maxClients: Int = 65_536) {
    self.rate = rate
    self.burst = Double(max(1, burst))
    self.trustedProxies = trustedProxies
    self.maxClients = maxClients
  }

  /// Misses refused so far.
  public var refused: Int { refusals.load(ordering: .relaxed) }

  /// The client `request` counts as; nil when it is not limited.
  ///
  /// Over TCP, the peer, or past a trusted proxy the nearest untrusted `X-Forwarded-For`
  /// address. On the Unix socket, whose peers are local programs its file mode admits, only a
  /// request a proxy forwarded (one with `X-Forwarded-For`) is limited, by that address.
  func client(of request: HTTPRequest) -> IPAddress? {
    var client: IPAddress?
    if request.overNetwork {
      guard let peer = request.peer else { return nil }
      guard trustedProxies.contains(where: { $0.contains(peer) }) else { return Self.key(peer) }
      client = peer
    }
    if let forwarded = request.header("x-forwarded-for") {
      // Right to left: each hop appended the address it saw; the first untrusted one is as
      // far as the chain can be believed. At most 32 hops are read.
      for hop in forwarded.split(separator: ",").suffix(32).reversed() {
        guard let address = IPAddress(String(hop.trimmingWhitespace())) else { break }
        client = address.mappedIPv4 ?? address
        if !trustedProxies.contains(where: { $0.contains(address.mappedIPv4 ?? address) }) {
          break
        }
      }
    }
    return client.map(Self.key)
  }

  /// The request header `client(of:)` reads (for `Route.reads`).
  static let reads: Set<String> = ["x-forwarded-for"]

  /// IPv4 as is; IPv6 cut to its /64.
  static func key(_ address: IPAddress) -> IPAddress {
    guard case .v6(let bytes) = address else { return address }
    return .v6(Array(bytes[0..<8]) + Array(repeating: 0, count: 8))
  }

  /// Takes a token from `client`'s bucket; nil when there was one, else the wait.
  func admit(_ client: IPAddress, now: ContinuousClock.Instant) -> Double? {
    let wait: Double? = buckets.withLock { buckets in
      var bucket = buckets[client] ?? Bucket(tokens: burst, updated: now)
      let elapsed = Self.seconds(now - bucket.updated)
      bucket.tokens = min(burst, bucket.tokens + max(0, elapsed) * rate)
      bucket.updated = max(bucket.updated, now)
      let wait: Double?
      if bucket.tokens >= 1 {
        bucket.tokens -= 1
        wait = nil
      } else {
        wait = (1 - bucket.tokens) / rate
      }
      if buckets[client] == nil && buckets.count >= maxClients { prune(&buckets, now: now) }
      buckets[client] = bucket
      return wait
    }
    if wait != nil { refusals.add(1, ordering: .relaxed) }
    return wait
  }

  /// Buckets held (for tests).
  var clients: Int { buckets.withLock { $0.count } }

  /// Drops every bucket that has refilled (forgetting it changes nothing). When that frees
  /// less than a sixteenth, some busy ones go too, so the next new clients do not each pay
  /// for a full pass: more clients than `maxClients` at once each get a fresh bucket sooner.
  private func prune(_ buckets: inout [IPAddress: Bucket], now: ContinuousClock.Instant) {
    buckets = buckets.filter { _, bucket in
      bucket.tokens + Self.seconds(now - bucket.updated) * rate < burst
    }
    let target = maxClients - max(1, maxClients / 16)
    if buckets.count > target {
      for key in Array(buckets.keys.prefix(buckets.count - target)) { buckets[key] = nil }
    }
  }

  private static func seconds(_ duration: Duration) -> Double {
    let (seconds, attoseconds) = duration.components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
