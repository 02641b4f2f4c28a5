#if canImport(Glibc)
  import Glibc
#endif

/// A resolved IPv4 or IPv6 address, and whether it is public.
public enum IPAddress: Sendable, Hashable, CustomStringConvertible {
  case v4(UInt8, UInt8, UInt8, UInt8)
  case v6([UInt8])

  /// Parses dotted IPv4 or textual IPv6 (no brackets, no zone).
  public init?(_ text: String) {
    var v4 = in_addr()
    if inet_pton(AF_INET, text, &v4) == 1 {
      self.init(v4)
      return
    }
    var v6 = in6_addr()
    if inet_pton(AF_INET6, text, &v6) == 1 {
      self = .v6(withUnsafeBytes(of: &v6) { Array($0) })
      return
    }
    return nil
  }

  init(_ address: in_addr) {
    let b = withUnsafeBytes(of: address) { Array($0) }
    self = .v4(b[0], b[1], b[2], b[3])
  }

  /// From raw network-order bytes: 4 for IPv4, 16 for IPv6.
  init?(bytes: UnsafeBufferPointer<UInt8>) {
    switch bytes.count {
    case 4: self = .v4(bytes[0], bytes[1], bytes[2], bytes[3])
    case 16: self = .v6(Array(bytes))
    default: return nil
    }
  }

  /// The IPv4 host an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) stands for: the same
  /// endpoint, so address rules judge it as that IPv4 address.
  public var mappedIPv4: IPAddress? {
    guard case .v6(let b) = self, b[0..<10].allSatisfy({ $0 == 0 }), b[10] == 0xFF, b[11] == 0xFF
    else { return nil }
    return .v4(b[12], b[13], b[14], b[15])
  }

  /// IPv4 addresses carried inside an IPv6 one, which a packet to it may end up at: mapped
  /// (`::ffff:0:0/96`), translated (`::ffff:0:0:0/96`), compatible (`::/96`), NAT64
  /// (`64:ff9b::/96`, `64:ff9b:1::/48`), 6to4 (`2002::/16`), Teredo (`2001::/32`: server
  /// and client), ISATAP (interface id `0:5efe` or `200:5efe`).
  var embeddedIPv4: [IPAddress] {
    guard case .v6(let b) = self else { return [] }
    func v4(_ i: Int) -> IPAddress { .v4(b[i], b[i + 1], b[i + 2], b[i + 3]) }
    var found: [IPAddress] = []
    let zeros8 = b[0..<8].allSatisfy { $0 == 0 }
    if zeros8 && b[8] == 0 && b[9] == 0 && b[10] == 0xFF && b[11] == 0xFF { found.append(v4(12)) }
    if zeros8 && b[8] == 0xFF && b[9] == 0xFF && b[10] == 0 && b[11] == 0 { found.append(v4(12)) }
    if zeros8 && b[8..<12].allSatisfy({ $0 == 0 }) && !b[12..<16].allSatisfy({ $0 == 0 })
      && !(b[12..<15].allSatisfy { $0 == 0 } && b[15] == 1)
    {
      found.append(v4(12))
    }
    if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B {
      if b[4..<12].allSatisfy({ $0 == 0 }) { found.append(v4(12)) }  // 64:ff9b::/96
      if b[4] == 0 && b[5] == 1 { found.append(v4(12)) }  // 64:ff9b:1::/48, local use
    }
    if b[0] == 0x20 && b[1] == 0x02 { found.append(v4(2)) }  // 6to4
    if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0 {
      // Teredo: the server, and the client's address stored inverted.
      found.append(v4(4))
      found.append(.v4(~b[12], ~b[13], ~b[14], ~b[15]))
    }
    if (b[8] == 0 || b[8] == 2) && b[9] == 0 && b[10] == 0x5E && b[11] == 0xFE {
      found.append(v4(12))  // ISATAP, under any prefix
    }
    return found
  }

  /// 127.0.0.0/8 or ::1, also as IPv4 inside IPv6.
  public var isLoopback: Bool {
    switch self {
    case .v4(let a, _, _, _): return a == 127
    case .v6(let b):
      if embeddedIPv4.contains(where: \.isLoopback) { return true }
      return b[0..<15].allSatisfy { $0 == 0 } && b[15] == 1
    }
  }

  /// True for addresses a public origin can have: not loopback, private, link-local (cloud
  /// metadata services live there), CGNAT, multicast, documentation, benchmarking, reserved
  /// or unspecified, and, for IPv6, no IPv4 inside it that fails the same test.
  public var isPublic: Bool {
    switch self {
    case .v4(let a, let b, let c, _):
      switch a {
      case 0, 10, 127: return false  // "this network", private, loopback
      case 100 where (64...127).contains(b): return false  // CGNAT 100.64/10
      case 169 where b == 254: return false  // link-local, metadata
      case 172 where (16...31).contains(b): return false  // private
      case 192 where b == 168: return false  // private
      case 192 where b == 0 && (c == 0 || c == 2): return false  // IETF, TEST-NET-1
      case 192 where b == 88 && c == 99: return false  // 6to4 relay anycast
      case 198 where b == 18 || b == 19: return false  // benchmarking
      case 198 where b == 51 && c == 100, 203 where b == 0 && c == 113: return false  // TEST-NET
      case 224...255: return false  // multicast, reserved, broadcast
      default: return true
      }
    case .v6(let b):
      let embedded = embeddedIPv4
      if !embedded.isEmpty { return embedded.allSatisfy(\.isPublic) }
      if b[0..<15].allSatisfy({ $0 == 0 }) { return false }  // :: and ::1
      if b[0] & 0xFE == 0xFC { return false }  // fc00::/7 unique local
      if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return false }  // fe80::/10 link-local
      if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return false }  // fec0::/10 site-local
      if b[0] == 0xFF { return false }  // multicast
      if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return false }  // docs
      if b[0] == 0x3F && b[1] == 0xFF && b[2] & 0xF0 == 0 { return false }  // 3fff::/20 docs
      if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0x02 && b[4] == 0 && b[5] == 0 {
        return false  // 2001:2::/48 benchmarking
      }
      // 2001:10::/28 ORCHID
      if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] & 0xF0 == 0x10 { return false }
      if b[0] == 0x01 && b[1..<8].allSatisfy({ $0 == 0 }) { return false }  // 100::/64 discard
      if b[0] == 0 { return false }  // ::/8 reserved
      return true
    }
  }

  /// Dotted or colon-hexadecimal text.
  public var description: String {
    switch self {
    case .v4(let a, let b, let c, let d): return "\(a).\(b).\(c).\(d)"
    case .v6(let bytes):
      var address = in6_addr()
      withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
      var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
      inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
      return String(
        decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
  }

  /// The address's bytes in network order.
  var bytes: [UInt8] {
    switch self {
    case .v4(let a, let b, let c, let d): [a, b, c, d]
    case .v6(let bytes): bytes
    }
  }
}

/// A block of addresses in CIDR form (`10.0.0.0/8`, `::1/128`): what `allowed_networks`
/// lists.
public struct IPNetwork: Sendable, Hashable, CustomStringConvertible {
  /// The first address of the block.
  public let base: IPAddress
  /// Leading bits that must match.
  public let prefixLength: Int

  /// Parses `ADDRESS/BITS` or a bare address (a block of one).
  public init?(_ text: String) {
    let parts = text.split(separator: "/", omittingEmptySubsequences: false)
    guard (1...2).contains(parts.count), let address = IPAddress(String(parts[0])) else {
      return nil
    }
    let width = address.bytes.count * 8
    let bits: Int
    if parts.count == 2 {
      guard let value = Int(parts[1]), (0...width).contains(value), parts[1].allSatisfy(\.isNumber)
      else { return nil }
      bits = value
    } else {
      bits = width
    }
    // Keep the prefix only, so `10.1.2.3/8` and `10.0.0.0/8` are the same network.
    var masked = address.bytes
    for index in masked.indices {
      let keep = max(0, min(8, bits - index * 8))
      masked[index] &= keep == 8 ? 0xFF : ~(0xFF >> UInt8(keep))
    }
    base = masked.count == 4 ? .v4(masked[0], masked[1], masked[2], masked[3]) : .v6(masked)
    prefixLength = bits
  }

  /// 127.0.0.0/8 and ::1/128: an origin on the same machine.
  public static let loopback = [IPNetwork("127.0.0.0/8")!, IPNetwork("::1/128")!]

  /// Whether `address` lies in the block (IPv4 only in IPv4 blocks, IPv6 in IPv6 blocks).
  public func contains(_ address: IPAddress) -> Bool {
    let mine = base.bytes
    let theirs = address.bytes
    guard mine.count == theirs.count else { return false }
    var bits = prefixLength
    for index in mine.indices where bits > 0 {
      let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
      if mine[index] & mask != theirs[index] & mask { return false }
      bits -= 8
    }
    return true
  }

  /// `ADDRESS/BITS`.
  public var description: String { "\(base)/\(prefixLength)" }
}
