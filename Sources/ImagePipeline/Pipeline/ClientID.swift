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
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in name.utf8 {
      hash ^= UInt64(byte)
      hash &*= 0x100_0000_01b3
    }
    self.init(hash | 1 << 63)
  }

  /// The client of requests that name none.
  public static let shared = ClientID(0)

  /// The identity as a number.
  public var description: String { String(rawValue) }
}
