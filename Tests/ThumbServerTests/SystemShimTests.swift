import CSystem
import Foundation
import Testing

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The socket shim the daemon's event loop will stand on.
@Suite("System shim")
struct SystemShimTests {
  private func socketPath() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent(
      "thumbd-\(UUID().uuidString.prefix(8)).sock"
    ).path
  }

  @Test("the socket gets exactly the requested mode, 0660 by default")
  func socketMode() throws {
    let path = socketPath()
    defer { unlink(path) }
    let fd = ts_listen_unix(path, 0o660, 16)
    #expect(fd >= 0)
    defer { close(fd) }
    var info = stat()
    #expect(stat(path, &info) == 0)
    #expect(info.st_mode & 0o777 == 0o660)
    #expect(info.st_mode & S_IFMT == S_IFSOCK)
  }

  @Test("a stale socket is replaced; a live one or a regular file is not")
  func staleSockets() throws {
    let path = socketPath()
    defer { unlink(path) }
    let first = ts_listen_unix(path, 0o660, 16)
    #expect(first >= 0)
    #expect(ts_listen_unix(path, 0o660, 16) == -EADDRINUSE, "a live server keeps its socket")
    close(first)  // the file stays behind, and nothing answers on it now
    let second = ts_listen_unix(path, 0o660, 16)
    #expect(second >= 0, "a stale socket is replaced")
    close(second)
    unlink(path)
    #expect(FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8)))
    #expect(ts_listen_unix(path, 0o660, 16) == -EEXIST)
    #expect(FileManager.default.contents(atPath: path) == Data("keep me".utf8))
  }

  @Test("epoll reports an accepted connection's data and a wake-up")
  func pollRoundTrip() throws {
    let path = socketPath()
    defer { unlink(path) }
    let listener = ts_listen_unix(path, 0o600, 16)
    let poller = ts_poll_create()
    let wakeup = ts_wakeup_create()
    defer {
      close(listener)
      close(poller)
      close(wakeup)
    }
    #expect(ts_poll_watch(poller, listener, UInt32(TS_READABLE), 1, 0) == 0)
    #expect(ts_poll_watch(poller, wakeup, UInt32(TS_READABLE), 2, 0) == 0)
    #expect(ts_accept(listener) == -EAGAIN)
    let client = SocketClient.connect(path)
    #expect(client >= 0)
    defer { close(client) }
    var events = [ts_event](repeating: ts_event(), count: 8)
    #expect(ts_poll_wait(poller, &events, 8, 5000) == 1 && events[0].token == 1)
    let connection = ts_accept(listener)
    #expect(connection >= 0)
    defer { close(connection) }
    #expect(ts_poll_watch(poller, connection, UInt32(TS_READABLE), 3, 0) == 0)
    _ = "GET / HTTP/1.1\r\n".withCString { write(client, $0, 16) }
    #expect(ts_poll_wait(poller, &events, 8, 5000) == 1 && events[0].token == 3)
    #expect(ts_wakeup_signal(wakeup) == 0)
    #expect(ts_poll_wait(poller, &events, 8, 5000) >= 1)
    #expect(events.prefix(2).contains { $0.token == 2 })
    #expect(ts_wakeup_drain(wakeup) == 0)
  }

  @Test("TCP listeners bind loopback and report their port")
  func tcp() {
    let fd = ts_listen_tcp("127.0.0.1", 0, 16)
    #expect(fd >= 0)
    #expect(ts_local_port(fd) > 0)
    close(fd)
    #expect(ts_listen_tcp("not-an-address", 0, 16) == -EINVAL)
  }
}
