import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A network namespace of the test's own (`ip netns`), with only a loopback interface and a
/// resolv.conf of its own: a machine whose DNS the test controls, inside this machine.
///
/// Programs run in it with `command(_:)` (`ip netns exec` also bind-mounts the namespace's
/// resolv.conf over /etc/resolv.conf). Sockets the test itself needs in there (a DNS server,
/// origins, a loopback trap) are created with `inside(_:)`, on a thread that enters the
/// namespace: a socket stays in the namespace it was made in. Needs root and iproute2.
final class NetworkNamespace: @unchecked Sendable {
  // @unchecked: immutable after init.
  let name: String
  private let descriptor: Int32

  /// Whether namespaces can be made here (root, `ip` installed).
  static var isAvailable: Bool {
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
  }

  /// Whether the run must have them (CI sets `THUMBD_REQUIRE_NETNS=1`): then a missing
  /// namespace fails the test instead of leaving it out.
  static var isRequired: Bool { ProcessInfo.processInfo.environment["THUMBD_REQUIRE_NETNS"] == "1" }

  /// Creates `thumbd-test-XXXX` with loopback up and `resolvConf` as its resolv.conf.
  init(resolvConf: String) throws {
    name = "thumbd-test-\(getpid())-\(UUID().uuidString.prefix(6))"
    try Self.run(["ip", "netns", "add", name])
    try Self.run(["ip", "-n", name, "link", "set", "lo", "up"])
    let etc = "/etc/netns/\(name)"
    try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
    try resolvConf.write(toFile: etc + "/resolv.conf", atomically: true, encoding: .utf8)
    descriptor = open("/run/netns/\(name)", O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw POSIXError(.ENOENT) }
  }

  /// `argv` run inside the namespace.
  func command(_ argv: [String]) -> [String] { ["/usr/sbin/ip", "netns", "exec", name] + argv }

  /// Runs `body` on a thread inside the namespace and returns its result.
  func inside<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
    let descriptor = self.descriptor
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: Result<T, any Error>?
    let thread = Thread {
      if Self.enter(descriptor) != 0 {
        result = .failure(POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPERM))
      } else {
        result = Result { try body() }
      }
      done.signal()
    }
    thread.start()
    done.wait()
    return try result!.get()
  }

  /// setns(2) into a network namespace, for the calling thread only. Glibc's Swift module
  /// leaves setns out (it needs _GNU_SOURCE), so it is looked up at run time.
  private static func enter(_ descriptor: Int32) -> Int32 {
    typealias SetNS = @convention(c) (Int32, Int32) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setns") else { return -1 }
    let cloneNewNet: Int32 = 0x4000_0000
    return unsafeBitCast(symbol, to: SetNS.self)(descriptor, cloneNewNet)
  }

  /// Deletes the namespace and its /etc/netns folder.
  func remove() {
    close(descriptor)
    try? Self.run(["ip", "netns", "delete", name])
    try? FileManager.default.removeItem(atPath: "/etc/netns/\(name)")
  }

  private static func run(_ argv: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
    process.arguments = Array(argv.dropFirst())
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw POSIXError(.EPERM)
    }
  }
}

/// A DNS server on UDP for tests: answers A and AAAA queries from a closure (nil drops the
/// query unanswered, as a resolver that never answers), and counts the queries per name.
final class TestDNSServer: @unchecked Sendable {
  // @unchecked: `queries` is behind a lock; the socket is closed once, in stop().
  let port: UInt16
  private let fd: Int32
  private let lock = NSLock()
  private var queries: [String: Int] = [:]
  private var stopped = false
  /// Name (lower case, no trailing dot), type (1 A, 28 AAAA) and how many queries of that
  /// type came for the name before this one; returns addresses, or nil to stay silent.
  private let answer: @Sendable (String, Int, Int) -> [IPAddressText]?

  /// An address as text, for the closure.
  typealias IPAddressText = String

  /// Binds 127.0.0.1:`port` in the current network namespace.
  init(port: UInt16 = 53, answer: @escaping @Sendable (String, Int, Int) -> [String]?) throws {
    self.answer = answer
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    self.fd = fd
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard fd >= 0, bound == 0 else { throw POSIXError(.EADDRINUSE) }
    self.port = port
  }

  /// A-record queries seen for `name`.
  func queries(for name: String) -> Int { lock.withLock { queries[name + "/1"] ?? 0 } }

  /// Serves on a thread of its own until `stop()`.
  func start() -> TestDNSServer {
    Thread { [self] in serve() }.start()
    return self
  }

  /// Ends the server; its thread closes the socket within 100 ms.
  func stop() { lock.withLock { stopped = true } }

  private func serve() {
    defer { close(fd) }
    // Wakes every 100 ms to see whether to stop; the socket is closed by this thread alone,
    // so its number is never reused under a pending recvfrom.
    var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var buffer = [UInt8](repeating: 0, count: 512)
    while !lock.withLock({ stopped }) {
      var from = sockaddr_in()
      var length = socklen_t(MemoryLayout<sockaddr_in>.size)
      let n = withUnsafeMutablePointer(to: &from) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          recvfrom(fd, &buffer, buffer.count, 0, $0, &length)
        }
      }
      if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
      if n <= 0 { return }
      guard let reply = reply(to: Array(buffer[0..<n])) else { continue }
      _ = withUnsafePointer(to: &from) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          sendto(fd, reply, reply.count, 0, $0, length)
        }
      }
    }
  }

  /// The answer packet for a query, or nil to stay silent.
  private func reply(to query: [UInt8]) -> [UInt8]? {
    guard query.count > 12 else { return nil }
    var offset = 12
    var labels: [String] = []
    while offset < query.count, query[offset] != 0 {
      let length = Int(query[offset])
      guard offset + 1 + length <= query.count else { return nil }
      labels.append(String(decoding: query[(offset + 1)..<(offset + 1 + length)], as: UTF8.self))
      offset += 1 + length
    }
    guard offset + 5 <= query.count else { return nil }
    let questionEnd = offset + 5
    let type = Int(query[offset + 1]) << 8 | Int(query[offset + 2])
    let name = labels.joined(separator: ".").lowercased()
    let before = lock.withLock { () -> Int in
      defer { queries["\(name)/\(type)", default: 0] += 1 }
      return queries["\(name)/\(type)"] ?? 0
    }
    guard let addresses = answer(name, type, before) else { return nil }
    let records = addresses.compactMap { text -> [UInt8]? in
      var v4 = in_addr()
      var v6 = in6_addr()
      if type == 1, inet_pton(AF_INET, text, &v4) == 1 {
        return withUnsafeBytes(of: &v4) { Array($0) }
      }
      if type == 28, inet_pton(AF_INET6, text, &v6) == 1 {
        return withUnsafeBytes(of: &v6) { Array($0) }
      }
      return nil
    }
    var packet = Array(query[0..<2]) + [0x81, 0x80, 0, 1, 0, UInt8(records.count), 0, 0, 0, 0]
    packet += query[12..<questionEnd]
    for rdata in records {
      packet += [0xC0, 0x0C, 0, UInt8(type), 0, 1, 0, 0, 0, 0, 0, UInt8(rdata.count)] + rdata
    }
    return packet
  }
}
