import Foundation
import ImagePipeline
import Synchronization
import Testing
import ThumbProtocol

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// A changed source is never served stale: files against the real daemon and real files,
/// http sources against the real loopback origin, whose own log counts what it was asked.
@Suite("Source freshness", .serialized, .onLane(.clients))
struct FreshnessTests {
  /// An origin whose one picture can change while the test runs. It sends `ETag` and
  /// `Cache-Control` and answers a matching `If-None-Match` with 304; it counts full and
  /// conditional requests itself.
  final class ChangingOrigin: Sendable {
    struct State {
      var colour = Pictures.red
      var revision = 1
      var cacheControl = "max-age=1"
      /// What a 304 sends as its Cache-Control (the 200's when nil).
      var renewal: String?
      /// The `Age` a 200 is sent with: seconds of its lifetime already spent upstream. With
      /// the whole max-age spent, an entry is stale the moment it arrives, so a test needs no
      /// clock of its own and no sleep to see one go stale (RFC 9111, 4.2.3).
      var age: Int?
      var full = 0
      var conditional = 0
      var unconditional = 0
    }
    final class Shared: Sendable {
      let state = Mutex(State())
    }
    let shared = Shared()
    let origin: LoopbackOrigin

    init() throws {
      let shared = self.shared
      origin = try LoopbackOrigin.answering { request in
        shared.state.withLock { state in
          let etag = "\"rev-\(state.revision)\""
          if let asked = request.headers["if-none-match"] {
            state.conditional += 1
            if asked == etag {
              return LoopbackOrigin.Response(
                status: 304,
                headers: ["ETag": etag, "Cache-Control": state.renewal ?? state.cacheControl])
            }
          } else {
            state.unconditional += 1
          }
          state.full += 1
          var headers = [
            "ETag": etag, "Cache-Control": state.cacheControl, "Content-Type": "image/png",
          ]
          if let age = state.age { headers["Age"] = String(age) }
          return LoopbackOrigin.Response(headers: headers, body: Pictures.solid(state.colour))
        }
      }.start()
    }

    func change(to colour: (UInt8, UInt8, UInt8)) {
      shared.state.withLock {
        $0.colour = colour
        $0.revision += 1
      }
    }

    var url: String { origin.url("/picture.png") }
    var counts: State { shared.state.withLock { $0 } }

    func update(_ body: (inout State) -> Void) { shared.state.withLock { body(&$0) } }
  }

  static func target(_ url: String, size: Int = 64, extra: String = "") -> String {
    "/v1/thumbnail?url=\(url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
      + "&w=\(size)&h=\(size)&format=png" + extra
  }

  static func get(_ daemon: TestDaemon, _ target: String) -> (
    status: Int, cache: String?, body: [UInt8]
  ) {
    let response = SocketClient.get(daemon.socket, target).response
    return (
      SocketClient.status(of: response), SocketClient.header("X-Thumbd-Cache", in: response),
      SocketClient.body(of: response)
    )
  }

  /// Writes `bytes` over `path` in place (same inode), as an editor saving without a rename.
  static func overwrite(_ path: String, with bytes: [UInt8]) throws {
    let fd = open(path, O_WRONLY | O_TRUNC)
    try #require(fd >= 0)
    defer { close(fd) }
    try #require(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
  }

  /// A daemon directory with a file root in it, and the path of the photo the tests put there.
  static func fileRoot() throws -> (directory: String, root: String, photo: String) {
    let directory = TestDaemon.makeDirectory()
    let root = directory + "/files"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    return (directory, root, root + "/photo.png")
  }

  static func modificationTime(_ path: String) -> timespec {
    var info = stat()
    stat(path, &info)
    return info.st_mtim
  }

  @Test(
    "a file overwritten with other content is served anew: from memory, from disk, after a restart, with its mtime restored, and renamed over"
  )
  func fileChanges() async throws {
    let (directory, root, photo) = try Self.fileRoot()
    // Level 0 (stored) PNGs: every colour has the same byte count, so the size alone cannot
    // tell the versions apart.
    func picture(_ colour: (UInt8, UInt8, UInt8)) -> [UInt8] {
      let pixels = [UInt8]((0..<(32 * 32)).flatMap { _ in [colour.0, colour.1, colour.2] })
      return try! ImageEncoder.png(
        Bitmap(pixels: pixels, width: 32, height: 32, channels: 3), level: 0)
    }
    try Data(picture(Pictures.red)).write(to: URL(fileURLWithPath: photo))
    let arguments = ["--file-root", root, "--cache-dir", directory + "/cache"]
    let target = Self.target("file://" + photo)

    var daemon = try await TestDaemon.start(arguments, directory: directory)
    var answer = Self.get(daemon, target)
    #expect(answer.status == 200 && Pictures.shows(answer.body, Pictures.red))
    answer = Self.get(daemon, target)
    #expect(answer.cache == "memory" && Pictures.shows(answer.body, Pictures.red))

    // In place, while the old one is in memory.
    try Self.overwrite(photo, with: picture(Pictures.green))
    answer = Self.get(daemon, target)
    #expect(answer.cache == "miss", "a changed file was served from \(answer.cache ?? "?")")
    #expect(Pictures.shows(answer.body, Pictures.green))
    #expect(daemon.metric("thumbd_source_changes_total") == 1)

    // Changed while the daemon was down: the disk entry is checked like a memory one.
    #expect(daemon.stop() == 0)
    try Self.overwrite(photo, with: picture(Pictures.blue))
    daemon = try await TestDaemon.start(arguments, directory: directory)
    answer = Self.get(daemon, target)
    #expect(answer.cache == "miss" && Pictures.shows(answer.body, Pictures.blue))
    // Unchanged across a restart: the disk entry is served.
    #expect(daemon.stop() == 0)
    daemon = try await TestDaemon.start(arguments, directory: directory)
    answer = Self.get(daemon, target)
    #expect(answer.cache == "disk" && Pictures.shows(answer.body, Pictures.blue))

    // Same size, mtime put back as `touch -d` does: the ctime still moved.
    let before = Self.modificationTime(photo)
    try Self.overwrite(photo, with: picture(Pictures.yellow))
    var times = [before, before]
    #expect(utimensat(AT_FDCWD, photo, &times, 0) == 0)
    #expect(Self.modificationTime(photo).tv_sec == before.tv_sec)
    answer = Self.get(daemon, target)
    #expect(Pictures.shows(answer.body, Pictures.yellow), "a restored mtime hid the change")

    // Renamed over the old path: another inode.
    try Data(picture(Pictures.grey)).write(to: URL(fileURLWithPath: root + "/.photo.tmp"))
    #expect(rename(root + "/.photo.tmp", photo) == 0)
    answer = Self.get(daemon, target)
    #expect(Pictures.shows(answer.body, Pictures.grey), "a rename over the path was missed")
    answer = Self.get(daemon, target)
    #expect(answer.cache == "memory" && Pictures.shows(answer.body, Pictures.grey))
    #expect(daemon.stop() == 0)
  }

  @Test(
    "concurrent clients: a request sent after a change, alone or pipelined behind an older one, never gets an older picture"
  )
  func concurrentChanges() async throws {
    let (directory, root, photo) = try Self.fileRoot()
    let versions = Versions(path: photo)
    try Data(Versions.picture(0)).write(to: URL(fileURLWithPath: photo))
    let daemon = try await TestDaemon.start(
      ["--file-root", root, "--cache-dir", ""], driver: .inProcess, directory: directory)
    defer { daemon.stop() }
    let target = Self.target("file://" + photo)
    let request = "GET \(target) HTTP/1.1\r\nHost: thumbd\r\n"
    let socket = daemon.socket

    // Eight clients at once, each on threads of its own, 24 rounds each. Every third round
    // pipelines: the first request, a change, then the second on the same connection, which
    // the daemon may read in one piece with the first.
    let failures = await withTaskGroup(of: [String].self) { group in
      for client in 0..<8 {
        group.addTask {
          await Self.offPool {
            var failures: [String] = []
            for round in 0..<24 {
              let known = round % 4 == client % 4 ? versions.change() : versions.newest
              if round % 3 == 0 {
                let fd = SocketClient.connect(socket)
                SocketClient.sendAll(fd, Array((request + "\r\n").utf8))
                let later = versions.change()
                SocketClient.sendAll(fd, Array((request + "Connection: close\r\n\r\n").utf8))
                let both = SocketClient.readToEnd(fd)
                close(fd)
                let answers = SocketClient.responses(in: both)
                let seen = (
                  answers.count > 0 ? Versions.version(answers[0]) : -1,
                  answers.count > 1 ? Versions.version(answers[1]) : -1
                )
                if seen.0 < known || seen.1 < later {
                  failures.append("pipelined: \(seen.0) for \(known), \(seen.1) for \(later)")
                }
              } else {
                let seen = Versions.version(of: SocketClient.get(socket, target).response)
                if seen < known { failures.append("got \(seen) after \(known) was in place") }
              }
            }
            return failures
          }
        }
      }
      return await group.reduce(into: []) { $0 += $1 }
    }
    #expect(failures.isEmpty, "\(failures)")
    #expect(versions.newest > 60)
  }

  /// Numbered versions of one picture, each put in place by a rename (never seen half
  /// written), and the newest in place.
  final class Versions: Sendable {
    let path: String
    private let published = Mutex(0)

    init(path: String) { self.path = path }

    /// Version v in two channels, 16 levels apart: up to 256 versions, each unmistakable.
    static func picture(_ version: Int) -> [UInt8] {
      Pictures.solid((UInt8(version % 16 * 16), UInt8(version / 16 * 16), 200))
    }

    /// The version a response shows; -1 for anything but a picture.
    static func version(of response: [UInt8]) -> Int {
      guard let head = SocketClient.head(of: response) else { return -1 }
      return version((head, SocketClient.body(of: response)))
    }

    /// The version a response shows (-1 for anything but a 200 with a picture).
    static func version(_ response: (head: ResponseHead, body: [UInt8])) -> Int {
      guard response.head.status == 200, let seen = Pictures.centre(of: response.body) else {
        return -1
      }
      return (Int(seen.0) + 8) / 16 + (Int(seen.1) + 8) / 16 * 16
    }

    var newest: Int { published.withLock { $0 } }

    /// Puts the next version in place; returns its number once it is there.
    func change() -> Int {
      published.withLock { newest in
        newest += 1
        let temporary = path + ".\(newest).tmp"
        try! Data(Self.picture(newest)).write(to: URL(fileURLWithPath: temporary))
        rename(temporary, path)
        return newest
      }
    }
  }

  @Test(
    "http: after max-age the new picture is served; 200 requests for a stale entry make one conditional request, and its 304 decodes nothing"
  )
  func revalidation() async throws {
    let origin = try ChangingOrigin()
    defer { origin.origin.stop() }
    // Every 200 arrives with its max-age spent: stale at once, no waiting.
    origin.update { $0.age = 1 }
    let daemon = try await TestDaemon.start(["--allow-private"], driver: .inProcess)
    defer { daemon.stop() }
    let target = Self.target(origin.url)
    var answer = Self.get(daemon, target)
    #expect(answer.status == 200 && Pictures.shows(answer.body, Pictures.red))

    origin.change(to: Pictures.green)
    answer = Self.get(daemon, target)
    #expect(Pictures.shows(answer.body, Pictures.green), "the old picture outlived max-age")
    #expect(origin.counts.conditional == 1)
    #expect(daemon.metric("thumbd_revalidations_total{result=\"changed\"}") == 1)

    // Stale again (the green 200 came with its max-age spent), unchanged: the 304 renews for a
    // minute, so no request below sees it stale a second time however slow the machine.
    origin.update { $0.renewal = "max-age=60" }
    let decodes = try #require(daemon.metric("thumbd_decodes_total"))
    let before = origin.counts
    let statuses = await withTaskGroup(of: (Int, Bool).self) { group in
      for _ in 0..<200 {
        group.addTask {
          await Self.offPool {
            let answer = Self.get(daemon, target)
            return (answer.status, Pictures.shows(answer.body, Pictures.green))
          }
        }
      }
      var all: [(Int, Bool)] = []
      for await result in group { all.append(result) }
      return all
    }
    #expect(statuses.count == 200 && statuses.allSatisfy { $0.0 == 200 && $0.1 })
    let after = origin.counts
    #expect(after.conditional - before.conditional == 1, "conditional requests for one stale entry")
    #expect(after.full == before.full, "the 304 was followed by a download")
    #expect(daemon.metric("thumbd_decodes_total") == decodes, "a 304 was decoded again")
    #expect(daemon.metric("thumbd_revalidations_total{result=\"unchanged\"}") == 1)
  }

  @Test("no-store leaves nothing in the cache directory and is fetched for every request")
  func noStore() async throws {
    let origin = try ChangingOrigin()
    defer { origin.origin.stop() }
    origin.update { $0.cacheControl = "no-store" }
    let directory = TestDaemon.makeDirectory()
    let daemon = try await TestDaemon.start(["--allow-private"], directory: directory)
    let target = Self.target(origin.url)
    let first = SocketClient.get(daemon.socket, target).response
    #expect(SocketClient.status(of: first) == 200)
    #expect(SocketClient.header("Cache-Control", in: first) == "no-store")
    #expect(Self.get(daemon, target).cache == "miss")
    #expect(origin.counts.full == 2)
    #expect(daemon.stop() == 0)  // every write scheduled has landed by now
    let files =
      FileManager.default.enumerator(atPath: directory + "/cache")?.allObjects as? [String]
    #expect((files ?? []).filter { $0.hasSuffix(".tdc") }.isEmpty, "\(files ?? [])")
  }

  @Test(
    "stale_if_error: a dead origin gets the stale thumbnail, marked stale; without it, an error")
  func staleIfError() async throws {
    for allowance in [60, 0] {
      let origin = try ChangingOrigin()
      origin.update { $0.age = 1 }  // stale on arrival
      let daemon = try await TestDaemon.start(
        ["--allow-private", "--stale-if-error", String(allowance), "--fetch-retries", "0"],
        driver: .inProcess)
      let target = Self.target(origin.url)
      #expect(Self.get(daemon, target).status == 200)
      origin.origin.stop()
      let answer = SocketClient.get(daemon.socket, target).response
      if allowance > 0 {
        #expect(SocketClient.status(of: answer) == 200)
        #expect(SocketClient.header("X-Thumbd-Cache", in: answer) == "stale")
        #expect(SocketClient.header("Cache-Control", in: answer) == "public, max-age=0")
        #expect(daemon.metric("thumbd_stale_served_total") == 1)
      } else {
        #expect(SocketClient.status(of: answer) >= 500, "a dead origin without stale_if_error")
      }
      #expect(daemon.metric("thumbd_revalidations_total{result=\"error\"}") == 1)
      daemon.stop()
    }
  }

  @Test(
    "stale_while_revalidate: a stale entry is served at once, marked stale, while one revalidation brings the new picture"
  )
  func staleWhileRevalidate() async throws {
    let origin = try ChangingOrigin()
    defer { origin.origin.stop() }
    origin.update { $0.age = 1 }  // the first picture is stale on arrival
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--stale-while-revalidate", "60"], driver: .inProcess)
    defer { daemon.stop() }
    let target = Self.target(origin.url)
    #expect(Pictures.shows(Self.get(daemon, target).body, Pictures.red))
    // The next one stays fresh for a minute, however slow the machine.
    origin.update {
      $0.age = nil
      $0.cacheControl = "max-age=60"
    }
    origin.change(to: Pictures.green)
    let stale = Self.get(daemon, target)
    #expect(stale.cache == "stale" && Pictures.shows(stale.body, Pictures.red))
    // The revalidation runs without anyone waiting; its answer replaces the entry.
    await eventually("the new picture after the background revalidation") {
      let answer = Self.get(daemon, target)
      return answer.cache != "stale" && Pictures.shows(answer.body, Pictures.green)
    }
    #expect(origin.counts.conditional >= 1)
    #expect(daemon.metric("thumbd_stale_served_total") ?? 0 >= 1)
  }

  @Test("rev: the same URL with a new rev is rendered anew from the source as it is now")
  func revisions() async throws {
    let origin = try ChangingOrigin()
    defer { origin.origin.stop() }
    origin.update { $0.cacheControl = "max-age=3600" }
    let daemon = try await TestDaemon.start(["--allow-private"], driver: .inProcess)
    defer { daemon.stop() }
    #expect(
      Pictures.shows(Self.get(daemon, Self.target(origin.url, extra: "&rev=1")).body, Pictures.red))
    origin.change(to: Pictures.green)
    // Fresh for an hour: rev 1 stays what it was...
    let same = Self.get(daemon, Self.target(origin.url, extra: "&rev=1"))
    #expect(same.cache == "memory" && Pictures.shows(same.body, Pictures.red))
    // ...and rev 2 asks the origin, though the source is fresh.
    let next = Self.get(daemon, Self.target(origin.url, extra: "&rev=2"))
    #expect(next.cache == "miss" && Pictures.shows(next.body, Pictures.green))
    #expect(Self.get(daemon, Self.target(origin.url, extra: "&rev=")).status == 400)
    let longest = String(repeating: "r", count: Wire.maxRevisionLength)
    #expect(Self.get(daemon, Self.target(origin.url, extra: "&rev=" + longest)).status == 200)
    #expect(Self.get(daemon, Self.target(origin.url, extra: "&rev=r" + longest)).status == 400)
  }

  @Test("purge finds a source by any spelling: a fragment, an upper-case scheme, file://localhost")
  func purgeBySpelling() async throws {
    let origin = try ChangingOrigin()
    defer { origin.origin.stop() }
    origin.update { $0.cacheControl = "max-age=3600" }
    let root = TestDaemon.makeDirectory()
    let file = root + "/pictures/a.png"
    try FileManager.default.createDirectory(
      atPath: root + "/pictures", withIntermediateDirectories: true)
    try Data(Pictures.solid((10, 200, 30))).write(to: URL(fileURLWithPath: file))
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--file-root", root + "/pictures"], driver: .inProcess)
    defer { daemon.stop() }
    func encode(_ text: String) -> String {
      text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }
    let http = origin.url
    let spellings = [
      (asked: http, purged: http.replacingOccurrences(of: "http://", with: "HTTP://") + "#frag"),
      (asked: "file://" + file, purged: "FILE://localhost" + file + "#frag"),
      (asked: "file://localhost" + file + "#x", purged: "file://" + file),
    ]
    for (asked, purged) in spellings {
      let target = "/v1/thumbnail?url=\(encode(asked))&w=16&h=16&format=png"
      #expect(Self.get(daemon, target).status == 200)
      #expect(Self.get(daemon, target).cache == "memory")
      let response = SocketClient.request(
        daemon.socket, "DELETE", "/v1/source?url=\(encode(purged))")
      let text = String(decoding: SocketClient.body(of: response), as: UTF8.self)
      #expect((Int(text.filter(\.isNumber)) ?? 0) >= 1, "\(purged): \(text)")
      #expect(
        Self.get(daemon, target).cache == "miss", "\(asked) kept its thumbnail after \(purged)")
    }
  }

  @Test(
    "purge drops every size and format; the next request is a miss; over TCP it is refused unless enabled"
  )
  func purge() async throws {
    let origin = try ChangingOrigin()
    defer { origin.origin.stop() }
    origin.update { $0.cacheControl = "max-age=3600" }
    let port = TestPorts.unused()
    let daemon = try await TestDaemon.start(
      ["--allow-private", "--listen", "127.0.0.1:\(port)"], driver: .inProcess)
    defer { daemon.stop() }
    let url = origin.url
    let encoded = url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    let variants = [
      Self.target(url, size: 32), Self.target(url, size: 64),
      Self.target(url, size: 64).replacingOccurrences(of: "format=png", with: "format=jpeg"),
      Self.target(url, size: 48, extra: "&rev=7"),
    ]
    for variant in variants { #expect(Self.get(daemon, variant).status == 200) }
    for variant in variants { #expect(Self.get(daemon, variant).cache == "memory") }

    let refused = SocketClient.getTCP(port: port, "/v1/source?url=\(encoded)", method: "DELETE")
    #expect(SocketClient.status(of: refused) == 403)
    #expect(Self.get(daemon, variants[0]).cache == "memory", "a refused purge purged")

    let purged = SocketClient.request(daemon.socket, "DELETE", "/v1/source?url=\(encoded)")
    #expect(SocketClient.status(of: purged) == 200)
    let text = String(decoding: SocketClient.body(of: purged), as: UTF8.self)
    let count = Int(text.filter(\.isNumber)) ?? 0
    // Four in memory, four on disk (written before the purge answers), the source bytes.
    #expect(count >= 8, "\(text)")
    for variant in variants { #expect(Self.get(daemon, variant).cache == "miss") }
    #expect(daemon.metric("thumbd_purges_total") == 1)
    let wrongMethod = SocketClient.request(daemon.socket, "GET", "/v1/source?url=\(encoded)")
    #expect(SocketClient.status(of: wrongMethod) == 405)

    let openPort = TestPorts.unused()
    let open = try await TestDaemon.start(
      ["--allow-private", "--listen", "127.0.0.1:\(openPort)", "--network-purge"],
      driver: .inProcess)
    defer { open.stop() }
    let allowed = SocketClient.getTCP(port: openPort, "/v1/source?url=\(encoded)", method: "DELETE")
    #expect(SocketClient.status(of: allowed) == 200)
  }

  @Test(
    "HEAD matches GET's headers without a body; Date is present; Cache-Control never exceeds the origin's freshness"
  )
  func responseHeaders() async throws {
    let origin = try ChangingOrigin()
    defer { origin.origin.stop() }
    origin.update { $0.cacheControl = "max-age=100" }
    let daemon = try await TestDaemon.start(["--allow-private"], driver: .inProcess)
    defer { daemon.stop() }
    let target = Self.target(origin.url)
    _ = Self.get(daemon, target)
    let get = SocketClient.request(daemon.socket, "GET", target)
    let head = SocketClient.request(daemon.socket, "HEAD", target)
    func headers(_ response: [UInt8]) -> [ResponseHead.Field] {
      (SocketClient.head(of: response)?.fields ?? []).filter { $0.name != "date" }
    }
    #expect(!headers(get).isEmpty)
    #expect(headers(head) == headers(get))
    #expect(SocketClient.body(of: head).isEmpty && !SocketClient.body(of: get).isEmpty)
    for response in [get, head] {
      let date = try #require(SocketClient.header("Date", in: response))
      let seconds = try #require(HTTPDate.parse(date))
      #expect(abs(seconds - Date().timeIntervalSince1970) < 60)
    }
    let control = try #require(SocketClient.header("Cache-Control", in: get))
    let maxAge = try #require(Int(control.split(separator: "=").last ?? ""))
    #expect(control.hasPrefix("public, max-age=") && maxAge <= 100 && maxAge >= 90)
    for path in ["/healthz", "/metrics"] {
      let headOnly = SocketClient.request(daemon.socket, "HEAD", path)
      #expect(SocketClient.status(of: headOnly) == 200 && SocketClient.body(of: headOnly).isEmpty)
      #expect(SocketClient.header("Date", in: headOnly) != nil)
    }
    // An ETag the client holds gets 304 until the source changes.
    let etag = try #require(SocketClient.header("ETag", in: get))
    let conditional = SocketClient.request(
      daemon.socket, "GET", target, headers: ["If-None-Match: \(etag)"])
    #expect(SocketClient.status(of: conditional) == 304)
  }

  static func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
      Thread.detachNewThread { continuation.resume(returning: body()) }
    }
  }
}
