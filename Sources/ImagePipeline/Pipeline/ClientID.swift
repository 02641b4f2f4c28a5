/// Who a request is for, as far as sharing prefetch capacity goes: prefetch work is admitted
/// fairly between clients, so one client announcing thousands of items cannot starve another's
/// look-ahead. A server gives each connection or session its own; requests without one share
/// `ClientID.shared`.
public struct ClientID: Hashable, Sendable, CustomStringConvertible {
  /// The identity; any value unique among live clients.
  public let rawValue: UInt64

  /// Wraps an identity.
  public init(_ rawValue: UInt64) { self.rawValue = rawValue }

  /// An identity from a name a client chose (an HTTP header, say): FNV-1a of its bytes, with
  /// the top bit set so named clients never collide with small numbered ones.
  public init(name: String) {
    self.init(hash: Self.fnv(name.utf8))
  }

  /// The identity of the client at `address`, for requests that name none: the same as
  /// `init(name:)` gives the name "address " followed by the address's text, made from the
  /// address's bytes without writing that text (it is made on every memory hit).
  public init(address: IPAddress) {
    var hash = Self.fnv("address ".utf8)
    switch address {
    case .v4(let a, let b, let c, let d):
      Self.decimal(a, into: &hash)
      Self.fnv(byte: UInt8(ascii: "."), into: &hash)
      Self.decimal(b, into: &hash)
      Self.fnv(byte: UInt8(ascii: "."), into: &hash)
      Self.decimal(c, into: &hash)
      Self.fnv(byte: UInt8(ascii: "."), into: &hash)
      Self.decimal(d, into: &hash)
      self.init(hash: hash)
    case .v6:
      self.init(hash: Self.fnv(address.description.utf8, from: hash))
    }
  }

  private init(hash: UInt64) { self.init(hash | 1 << 63) }

  /// FNV-1a of `bytes`, continuing from `hash`.
  private static func fnv(
    _ bytes: some Sequence<UInt8>, from hash: UInt64 = 0xcbf2_9ce4_8422_2325
  ) -> UInt64 {
    var hash = hash
    for byte in bytes { fnv(byte: byte, into: &hash) }
    return hash
  }

  private static func fnv(byte: UInt8, into hash: inout UInt64) {
    hash ^= UInt64(byte)
    hash &*= 0x100_0000_01b3
  }

  /// FNV-1a of `value`'s decimal digits, as its text would give.
  private static func decimal(_ value: UInt8, into hash: inout UInt64) {
    let zero = UInt8(ascii: "0")
    if value >= 100 { fnv(byte: zero + value / 100, into: &hash) }
    if value >= 10 { fnv(byte: zero + value / 10 % 10, into: &hash) }
    fnv(byte: zero + value % 10, into: &hash)
  }

  /// The client of requests that name none.
  public static let shared = ClientID(0)

  /// The identity as a number.
  public var description: String { String(rawValue) }
}
