import CSystem
import Foundation
import Testing

@testable import Loopback
@testable import TestSupport
@testable import ThumbServer

#if canImport(Glibc)
  import Glibc
#endif

/// Several event loops serving one server (`LoopGroup`): the bounds hold over all of them,
/// and a listener they share is closed once, by the last to let go.
@Suite("Event loops of one server")
struct LoopGroupTests {
  /// Never idle and never half-way through input: nothing to evict, nothing to time out.
  final class Holding: ConnectionHandler {
    func received(_ bytes: ArraySlice<UInt8>, on connection: LoopConnection) -> Bool { false }
    func drained(_ connection: LoopConnection) {}
    func closed(_ connection: LoopConnection) {}
    var hasPartialInput: Bool { false }
    var isIdle: Bool { false }
    var pendingWork: Int { 0 }
    var outputLimit: Int { 1 << 20 }
  }

  /// Idle from the start: what a full table may close for a new connection.
  final class Idle: ConnectionHandler {
    func received(_ bytes: ArraySlice<UInt8>, on connection: LoopConnection) -> Bool { false }
    func drained(_ connection: LoopConnection) {}
    func closed(_ connection: LoopConnection) {}
    var hasPartialInput: Bool { false }
    var isIdle: Bool { true }
    var pendingWork: Int { 0 }
    var outputLimit: Int { 1 << 20 }
  }

  /// Whether the server closed `fd` (EOF) within two seconds; false when it stays open.
  private static func closedByServer(_ fd: Int32) -> Bool {
    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&poller, 1, 2000) == 1 else { return false }
    var byte: UInt8 = 0
    return read(fd, &byte, 1) == 0
  }

  @Test("max_connections counts every loop's connections: one more on another loop is refused")
  func connectionsBoundOverLoops() async throws {
    let directory = TestDaemon.makeDirectory()
    let group = LoopGroup(size: 2)
    let limits = ServerLimits(maxConnections: 4)
    let loops = try (0..<2).map { _ in
      try EventLoop(limits: limits, logger: nil, group: group) { _, _ in Holding() }
    }
    // A listener of its own for each loop, so the test decides which loop accepts.
    let paths = [directory + "/a.sock", directory + "/b.sock"]
    for (loop, path) in zip(loops, paths) {
      let fd = ts_listen_unix(path, 0o600, 16)
      #expect(fd >= 0)
      try loop.listen(on: fd)
      loop.start()
    }
    defer {
      for loop in loops { loop.stop(drainTimeout: 0) }
      for loop in loops { loop.wait() }
    }
    var clients: [Int32] = []
    defer { for fd in clients { close(fd) } }
    for (count, path) in [paths[0], paths[0], paths[0], paths[1]].enumerated() {
      clients.append(SocketClient.connect(path))
      await eventually("accepted \(count + 1)") {
        group.connections.load(ordering: .relaxed) == count + 1
      }
    }
    // The second loop holds one: alone it would have room for three more.
    let refused = SocketClient.connect(paths[1])
    clients.append(refused)
    #expect(refused >= 0)
    #expect(Self.closedByServer(refused), "a fifth connection was kept")
    #expect(group.connections.load(ordering: .relaxed) == 4)
    #expect(!Self.closedByServer(clients[0]))
  }

  @Test(
    "a full table: a new connection on a loop with no idle connection closes another loop's idle one and is kept; with none idle anywhere it is refused"
  )
  func idleClosedOnAnotherLoop() async throws {
    let directory = TestDaemon.makeDirectory()
    let group = LoopGroup(size: 2)
    // The idle connection must outlive the test's steps: on the default idle timeout (60 s)
    // the loop's sweep closed it while a loaded machine took a minute between two connects,
    // and the count never reached the next step's.
    let limits = ServerLimits(maxConnections: 4, idleTimeout: 86_400)
    // The first loop's connections are idle, the second's busy.
    let loops = try [
      EventLoop(limits: limits, logger: nil, group: group) { _, _ in Idle() },
      EventLoop(limits: limits, logger: nil, group: group) { _, _ in Holding() },
    ]
    let paths = [directory + "/idle.sock", directory + "/busy.sock"]
    for (loop, path) in zip(loops, paths) {
      let fd = ts_listen_unix(path, 0o600, 16)
      #expect(fd >= 0)
      try loop.listen(on: fd)
      loop.start()
    }
    defer {
      for loop in loops { loop.stop(drainTimeout: 0) }
      for loop in loops { loop.wait() }
    }
    var clients: [Int32] = []
    defer { for fd in clients { close(fd) } }
    for (count, path) in [paths[0], paths[1], paths[1], paths[1]].enumerated() {
      clients.append(SocketClient.connect(path))
      await eventually("accepted \(count + 1)") {
        group.connections.load(ordering: .relaxed) == count + 1
      }
    }
    // The table is full and the busy loop has nothing to close: the idle loop closes its own.
    let kept = SocketClient.connect(paths[1])
    clients.append(kept)
    #expect(Self.closedByServer(clients[0]), "the other loop's idle connection stayed")
    #expect(!Self.closedByServer(kept), "the new connection was refused")
    #expect(group.connections.load(ordering: .relaxed) == 4)
    // The idle loop adopted it. Once its client closes it, that loop is empty; with a fourth
    // busy connection, nothing on either loop can be closed for the next: it is refused.
    close(kept)
    clients.removeLast()
    await eventually("the kept one closed") { group.connections.load(ordering: .relaxed) == 3 }
    clients.append(SocketClient.connect(paths[1]))
    await eventually("four busy") { group.connections.load(ordering: .relaxed) == 4 }
    let refused = SocketClient.connect(paths[1])
    clients.append(refused)
    #expect(Self.closedByServer(refused), "a connection past a busy table was kept")
    #expect(group.connections.load(ordering: .relaxed) == 4)
  }

  @Test("a listener every loop watches is closed by the last loop to let go, not before")
  func listenerClosedOnce() throws {
    let group = LoopGroup(size: 3)
    let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
    #expect(fd >= 0)
    group.share(fd)
    group.release(fd)
    group.release(fd)
    #expect(fcntl(fd, F_GETFD) >= 0, "closed while a loop still watched it")
    group.release(fd)
    #expect(fcntl(fd, F_GETFD) == -1 && errno == EBADF)
  }
}
