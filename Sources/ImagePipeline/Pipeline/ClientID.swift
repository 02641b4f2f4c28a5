import ThumbSystem
import ThumbWire

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
    self.init(hash: FNV1a.hash(name.utf8))
  }

  /// The identity of the client at `address`, for requests that name none: the same as
  /// `init(name:)` gives the name "address " followed by the address's text, made from the
  /// address's bytes without writing that text (it is made on every memory hit).
  public init(address: IPAddress) {
    var hash = FNV1a()
    hash.combine("address ".utf8)
    switch address {
    case .v4(let a, let b, let c, let d):
      Self.decimal(a, into: &hash)
      hash.combine(UInt8(ascii: "."))
      Self.decimal(b, into: &hash)
      hash.combine(UInt8(ascii: "."))
      Self.decimal(c, into: &hash)
      hash.combine(UInt8(ascii: "."))
      Self.decimal(d, into: &hash)
      self.init(hash: hash.value)
    case .v6:
      hash.combine(address.description.utf8)
      self.init(hash: hash.value)
    }
  }

  private init(hash: UInt64) { self.init(hash | 1 << 63) }

  /// `value`'s decimal digits into `hash`, as its text would give.
  private static func decimal(_ value: UInt8, into hash: inout FNV1a) {
    let zero = UInt8(ascii: "0")
    if value >= 100 { hash.combine(zero + value / 100) }
    if value >= 10 { hash.combine(zero + value / 10 % 10) }
    hash.combine(zero + value % 10)
  }

  /// The client of requests that name none.
  public static let shared = ClientID(0)

  /// The identity as a number.
  public var description: String { String(rawValue) }
}
