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

  /// The IPv4 address carried inside an IPv6 one (mapped, compatible, NAT64, 6to4), if any.
  var embeddedIPv4: IPAddress? {
    guard case .v6(let b) = self else { return nil }
    let zeros = b[0..<10].allSatisfy { $0 == 0 }
    // ::ffff:a.b.c.d (mapped)
    if zeros && b[10] == 0xFF && b[11] == 0xFF { return .v4(b[12], b[13], b[14], b[15]) }
    if zeros && b[10] == 0 && b[11] == 0 && !(b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1)
    {
      return .v4(b[12], b[13], b[14], b[15])  // ::a.b.c.d (deprecated compatible form)
    }
    if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B
      && b[4..<12].allSatisfy({ $0 == 0 })
    {
      return .v4(b[12], b[13], b[14], b[15])  // 64:ff9b::/96 NAT64
    }
    if b[0] == 0x20 && b[1] == 0x02 { return .v4(b[2], b[3], b[4], b[5]) }  // 2002::/16 6to4
    return nil
  }

  /// 127.0.0.0/8 or ::1, also as IPv4 inside IPv6.
  public var isLoopback: Bool {
    switch self {
    case .v4(let a, _, _, _): return a == 127
    case .v6(let b):
      if let v4 = embeddedIPv4 { return v4.isLoopback }
      return b[0..<15].allSatisfy { $0 == 0 } && b[15] == 1
    }
  }

  /// True for addresses a public origin can have: not loopback, private, link-local, CGNAT,
  /// multicast, reserved or unspecified, also when an IPv4 address hides inside IPv6.
  public var isPublic: Bool {
    switch self {
    case .v4(let a, let b, let c, _):
      switch a {
      case 0, 10, 127: return false  // "this network", private, loopback
      case 100 where (64...127).contains(b): return false  // CGNAT 100.64/10
      case 169 where b == 254: return false  // link-local
      case 172 where (16...31).contains(b): return false  // private
      case 192 where b == 168: return false  // private
      case 192 where b == 0 && (c == 0 || c == 2): return false  // IETF, TEST-NET-1
      case 198 where b == 18 || b == 19: return false  // benchmarking
      case 198 where b == 51 && c == 100, 203 where b == 0 && c == 113: return false  // TEST-NET
      case 224...255: return false  // multicast, reserved, broadcast
      default: return true
      }
    case .v6(let b):
      if let v4 = embeddedIPv4 { return v4.isPublic }
      if b.allSatisfy({ $0 == 0 }) { return false }  // ::
      if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return false }  // ::1
      if b[0] & 0xFE == 0xFC { return false }  // fc00::/7 unique local
      if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return false }  // fe80::/10 link-local
      if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return false }  // fec0::/10 site-local
      if b[0] == 0xFF { return false }  // multicast
      if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return false }  // docs
      if b[0] == 0x01 && b[1..<8].allSatisfy({ $0 == 0 }) { return false }  // 100::/64 discard
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
}
