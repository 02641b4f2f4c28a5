import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Resolves host names with getaddrinfo on a thread of its own: the call blocks, and blocking
/// calls must not sit on the cooperative pool.
enum HostResolver {
  /// Every address `host` resolves to; an IP literal resolves to itself.
  static func addresses(of host: String) async throws(FetchError) -> [IPAddress] {
    let literal =
      host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    if let address = IPAddress(literal) { return [address] }
    let result: Result<[IPAddress], FetchError> = await withCheckedContinuation { continuation in
      Thread.detachNewThread { continuation.resume(returning: resolve(host)) }
    }
    return try result.get()
  }

  private static func resolve(_ host: String) -> Result<[IPAddress], FetchError> {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var list: UnsafeMutablePointer<addrinfo>?
    let status = getaddrinfo(host, nil, &hints, &list)
    guard status == 0, let first = list else {
      return .failure(
        .transport("cannot resolve \(host): \(String(cString: gai_strerror(status)))"))
    }
    defer { freeaddrinfo(first) }
    var addresses: [IPAddress] = []
    var cursor: UnsafeMutablePointer<addrinfo>? = first
    while let info = cursor {
      if let sockaddr = info.pointee.ai_addr {
        if info.pointee.ai_family == AF_INET {
          sockaddr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
            addresses.append(IPAddress($0.pointee.sin_addr))
          }
        } else if info.pointee.ai_family == AF_INET6 {
          sockaddr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
            var address = $0.pointee.sin6_addr
            addresses.append(.v6(withUnsafeBytes(of: &address) { Array($0) }))
          }
        }
      }
      cursor = info.pointee.ai_next
    }
    return addresses.isEmpty ? .failure(.transport("\(host) has no address")) : .success(addresses)
  }
}
