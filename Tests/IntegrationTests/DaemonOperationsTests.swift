import CSystem
import Foundation
import Testing

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon as operators meet it: load shedding, shutdown, restarts, logs, systemd.
@Suite("Daemon operations", .serialized, .onLane(.clients))
struct DaemonOperationsTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  static func encoded(_ url: String) -> String {
    url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
  }

  /// Sends a request on its own thread and returns the raw response.
  static func background(_ socket: String, _ target: String) -> Task<[UInt8], Never> {
    Task.detached {
      await withCheckedContinuation { continuation in
        Thread.detachNewThread {
          continuation.resume(returning: SocketClient.get(socket, target).response)
        }
      }
    }
  }

  @Test("a full decode queue answers 503 with Retry-After; the admitted requests succeed")
  func fullQueueSheds() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo, holdUntilReleased: true) }
      .start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start([
      "--allow-private", "--cache-dir", "", "--decode-threads", "1", "--max-queued-decodes", "1",
    ])
    defer { daemon.stop() }
    let url = Self.encoded(origin.url("/p.jpg"))
    // 12 sizes of one source: one download, then 12 decodes arrive at once.
    let requests = (0..<12).map {
      Self.background(daemon.socket, "/v1/thumbnail?url=\(url)&w=\(40 + $0)")
    }
    await eventually("all joined the download") {
      origin.held == 1 && daemon.metric("thumbd_coalesced_joins_total") == 11
    }
    origin.release()
    var statuses: [Int] = []
    for request in requests {
      let response = await request.value
      statuses.append(SocketClient.status(of: response))
      if SocketClient.status(of: response) == 503 {
        #expect(String(decoding: response, as: UTF8.self).contains("Retry-After: 1\r\n"))
        #expect(String(decoding: response, as: UTF8.self).contains("\"queue_full\""))
      }
    }
    // At most one decode runs and one waits; the rest are refused at once.
    #expect(statuses.filter { $0 == 200 }.count >= 1)
    #expect(statuses.filter { $0 == 503 }.count >= 8)
    #expect(statuses.allSatisfy { $0 == 200 || $0 == 503 })
    #expect(SocketClient.get(daemon.socket, "/healthz").status == 200)
  }

  @Test("SIGTERM stops accepting, finishes the request in flight, then exits 0")
  func sigtermDrains() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo, holdUntilReleased: true) }
      .start()
    defer { origin.stop() }
    // A drain deadline far past the test's own steps: on a loaded machine this task may wait
    // seconds for a thread between the SIGTERM and the release (CI saw the default 10 s pass).
    // The deadline itself is `drainDeadline`'s subject.
    let daemon = try await TestDaemon.start([
      "--allow-private", "--cache-dir", "", "--drain-timeout", "300",
    ])
    let request = Self.background(
      daemon.socket, "/v1/thumbnail?url=\(Self.encoded(origin.url("/a.jpg")))&w=32")
    await eventually("request in flight") { origin.held == 1 }
    kill(daemon.pid, SIGTERM)
    await eventually("no longer accepting") { SocketClient.connect(daemon.socket) < 0 }
    origin.release()
    let response = await request.value
    #expect(SocketClient.status(of: response) == 200)
    #expect(await ChildProcess.exit(of: daemon.pid) == 0)
    #expect(daemon.log.contains("event=stopped abandoned=0"))
    #expect(!FileManager.default.fileExists(atPath: daemon.socket))
  }

  /// The first answer and the SIGTERM right after it: with a dispatch signal source the
  /// signal was ignored until dispatch had installed its handler, and the daemon ran on.
  @Test("a SIGTERM right after the daemon's first answer stops it, every time", arguments: 0..<10)
  func sigtermAtStart(attempt: Int) async throws {
    let daemon = try await TestDaemon.start(["--cache-dir", ""])
    kill(daemon.pid, SIGTERM)
    #expect(await ChildProcess.exit(of: daemon.pid, within: 20) == 0)
  }

  @Test("the drain deadline ends a shutdown that in-flight work would hold up")
  func drainDeadline() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo, holdUntilReleased: true) }
      .start()
    defer { origin.stop() }
    let daemon = try await TestDaemon.start([
      "--allow-private", "--cache-dir", "", "--drain-timeout", "0.2",
    ])
    let request = Self.background(
      daemon.socket, "/v1/thumbnail?url=\(Self.encoded(origin.url("/b.jpg")))&w=32")
    await eventually("request in flight") { origin.held == 1 }
    kill(daemon.pid, SIGTERM)
    #expect(await ChildProcess.exit(of: daemon.pid) == 0)
    #expect(daemon.log.contains("event=stopped abandoned=1"))
    #expect(await request.value.isEmpty, "the abandoned client sees the connection close")
    origin.release()
  }

  @Test("after a restart, thumbnails come from the disk cache without a new download")
  func restartServesFromDisk() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { origin.stop() }
    let directory = TestDaemon.makeDirectory()
    let target = "/v1/thumbnail?url=\(Self.encoded(origin.url("/c.jpg")))&w=64&h=64"
    let first = try await TestDaemon.start(["--allow-private"], directory: directory)
    let cold = SocketClient.get(first.socket, target).response
    #expect(String(decoding: cold, as: UTF8.self).contains("X-Thumbd-Cache: miss"))
    #expect(first.stop() == 0)
    let second = try await TestDaemon.start(["--allow-private"], directory: directory)
    defer { second.stop() }
    let warm = SocketClient.get(second.socket, target)
    #expect(warm.status == 200)
    #expect(String(decoding: warm.response, as: UTF8.self).contains("X-Thumbd-Cache: disk"))
    #expect(origin.requests == ["/c.jpg"])
    #expect(SocketClient.body(of: warm.response) == SocketClient.body(of: cold))
  }

  @Test(
    "logs: one JSON line per request with its format or error kind, source reduced to scheme, host and hash; SIGHUP reopens"
  )
  func logs() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { origin.stop() }
    let directory = TestDaemon.makeDirectory()
    let logFile = directory + "/access.log"
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--log-format", "json", "--log-file", logFile], directory: directory)
    defer { daemon.stop() }
    let secretURL = origin.url("/private/path.jpg?token=SECRET123")
    #expect(
      SocketClient.get(daemon.socket, "/v1/thumbnail?url=\(Self.encoded(secretURL))&w=20").status
        == 200)
    await eventually("request logged") {
      ((try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "").contains("/v1/thumbnail")
    }
    let text = try String(contentsOfFile: logFile, encoding: .utf8)
    #expect(!text.contains("SECRET123") && !text.contains("/private/"))
    let lines = text.split(separator: "\n")
    let records = lines.compactMap {
      try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String]
    }
    #expect(records.count == lines.count, "every line is a JSON object")
    let request = try #require(records.first { $0["path"] == "/v1/thumbnail" })
    #expect(request["status"] == "200" && request["cache"] == "miss")
    // The output format of a thumbnail, and the error kind of an error, are in the line.
    #expect(request["format"] == "jpeg" && request["error"] == nil, "\(request)")
    let source = try #require(request["src"])
    #expect(source.hasPrefix("http://127.0.0.1:\(origin.port)#") && source.count > 30)
    #expect(SocketClient.get(daemon.socket, "/v1/thumbnail?w=20").status == 400)
    await eventually("error logged") {
      ((try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "").contains(
        "\"error\":\"bad_request\"")
    }
    // Thumbnails sent by format, in /metrics.
    #expect(daemon.metric("thumbd_responses_total{format=\"jpeg\"}") == 1)
    // Rotation: move the file away, SIGHUP, and new lines land in a new file.
    try FileManager.default.moveItem(atPath: logFile, toPath: logFile + ".1")
    kill(daemon.pid, SIGHUP)
    // The new file can exist a moment before the logger writes to it (it is opened, then
    // swapped in): a request in that moment is logged to the old file. So the request is
    // made again until one lands in the new file.
    await eventually("new file written") {
      #expect(SocketClient.get(daemon.socket, "/healthz").status == 200)
      return ((try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "").contains("/healthz")
    }
  }

  @Test("2000 idle keep-alive connections cost no thread each; the daemon still answers")
  func idleConnections() async throws {
    let daemon = try await TestDaemon.start(["--cache-dir", ""])
    defer { daemon.stop() }
    let threadsBefore = try Self.threads(of: daemon.pid)
    var idle: [Int32] = []
    defer { for fd in idle { close(fd) } }
    for _ in 0..<2000 {
      let fd = SocketClient.connect(daemon.socket)
      try #require(fd >= 0)
      idle.append(fd)
    }
    // A request on the last connection proves every earlier one was accepted before it.
    let probe = Array("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n".utf8)
    _ = probe.withUnsafeBytes { send(idle[1999], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var reply = [UInt8](repeating: 0, count: 512)
    #expect(read(idle[1999], &reply, reply.count) > 0)
    #expect(SocketClient.status(of: reply) == 200)
    #expect(SocketClient.get(daemon.socket, "/healthz").status == 200)
    let threadsAfter = try Self.threads(of: daemon.pid)
    #expect(threadsAfter <= threadsBefore + 4, "\(threadsBefore) -> \(threadsAfter) threads")
  }

  static func threads(of pid: pid_t) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("Threads:") })
    return try #require(Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)))
  }

  @Test("socket activation: the daemon serves on the listener systemd passes as descriptor 3")
  func socketActivation() async throws {
    let directory = TestDaemon.makeDirectory()
    let path = directory + "/activated.sock"
    let listener = ts_listen_unix(path, 0o660, 16)
    try #require(listener >= 0)
    let script = "export LISTEN_PID=$$ LISTEN_FDS=1; exec \"$0\" serve --cache-dir ''"
    let pid = try ChildProcess.spawn(
      ["/bin/sh", "-c", script, ChildProcess.thumbd], standardError: directory + "/log",
      inherit: listener)
    close(listener)
    await eventually("serving on the passed socket") {
      SocketClient.get(path, "/healthz").status == 200
    }
    kill(pid, SIGTERM)
    #expect(await ChildProcess.exit(of: pid) == 0)
    let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
    #expect(log.contains("from systemd"))
  }

  @Test(
    "file roots: a root spelled through a link serves both spellings and in-root links; the listening line names the roots"
  )
  func rootThroughLink() async throws {
    let directory = TestDaemon.makeDirectory()
    let real = directory + "/photos"
    try FileManager.default.createDirectory(
      atPath: real + "/2019", withIntermediateDirectories: true)
    try Data(Self.photo).write(to: URL(fileURLWithPath: real + "/2019/a.jpg"))
    symlink(real, directory + "/Pictures")
    symlink(real + "/2019/a.jpg", real + "/favourite.jpg")
    let daemon = try await TestDaemon.start(
      ["--file-root", directory + "/Pictures"], directory: directory)
    defer { daemon.stop() }
    for path in ["/Pictures/2019/a.jpg", "/photos/2019/a.jpg", "/Pictures/favourite.jpg"] {
      let target = "/v1/thumbnail?url=\(Self.encoded("file://" + directory + path))&w=32&h=32"
      #expect(SocketClient.get(daemon.socket, target).status == 200, "\(path)")
    }
    #expect(daemon.log.contains("file_roots=\(directory)/Pictures->\(real) "), "\(daemon.log)")
  }

  @Test("a file root that does not exist stops start-up with a message naming it")
  func missingRoot() async throws {
    let directory = TestDaemon.makeDirectory()
    let outcome = try await ChildProcess.runThumbd([
      "serve", "--socket", directory + "/s.sock", "--cache-dir", "", "--file-root",
      "~/Pictures",
    ])
    #expect(outcome.status == 2, "docs/CONFIG.md: what stops start-up exits 2")
    #expect(outcome.standardError.contains("file_roots: ~/Pictures: No such file or directory"))
    #expect(!FileManager.default.fileExists(atPath: directory + "/s.sock"))
    // A socket that cannot be bound stops start-up the same way (it exited 1).
    let unbound = try await ChildProcess.runThumbd([
      "serve", "--socket", directory + "/no/such/folder/s.sock", "--cache-dir", "",
    ])
    #expect(unbound.status == 2 && unbound.standardError.contains("startup_failed"))
    #expect(unbound.standardError.contains("no/such/folder/s.sock"), "\(unbound.standardError)")
  }

  @Test("a file URL on a daemon without file roots is told how to add one")
  func noFileRoots() async throws {
    let daemon = try await TestDaemon.start(["--cache-dir", ""])
    defer { daemon.stop() }
    let answer = SocketClient.get(
      daemon.socket, "/v1/thumbnail?w=8&url=" + Self.encoded("file:///etc/hostname"))
    #expect(answer.status == 403)
    let body = String(decoding: SocketClient.body(of: answer.response), as: UTF8.self)
    #expect(
      body.contains("no file roots are configured") && body.contains("--file-root"), "\(body)")
  }
}
