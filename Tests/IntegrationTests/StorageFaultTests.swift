import Foundation
import Testing

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Storage faults through the real daemon: each gives a clear log line and a metric, and
/// serving goes on.
@Suite("Storage faults", .serialized, .onLane(.clients))
struct StorageFaultTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  static func target(_ url: String, size: Int = 96) -> String {
    "/v1/thumbnail?url=\(url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
      + "&w=\(size)&h=\(size)"
  }

  /// Whether a small tmpfs can be mounted here (root with CAP_SYS_ADMIN); CI requires it.
  static var canMount: Bool { getuid() == 0 }

  @Test(
    "a full disk: a clear log line, a metric, degraded health, serving goes on, and the cache keeps working by evicting",
    .enabled(if: canMount || NetworkNamespace.isRequired, "needs root to mount a small tmpfs"))
  func fullDisk() async throws {
    let mountPoint = TestDaemon.makeDirectory() + "/small"
    try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
    try #require(Self.run(["/bin/mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", mountPoint]))
    defer { _ = Self.run(["/bin/umount", "-l", mountPoint]) }
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { origin.stop() }
    let directory = TestDaemon.makeDirectory()
    // A budget far above the 512 KiB the file system has.
    let arguments = [
      "--allow-private", "--cache-dir", mountPoint + "/cache", "--disk-limit", "64MiB",
    ]
    var daemon = try await TestDaemon.start(arguments, directory: directory)
    // About 30 KB each at 400 px: 3.5 MB in all, seven times the space.
    for index in 0..<120 {
      let response = SocketClient.get(
        daemon.socket, Self.target(origin.url("/\(index).jpg"), size: 400))
      #expect(response.status == 200)
    }
    // Writes happen after delivery, so the first failure shows a little later.
    await eventually("a write found the disk full") {
      (daemon.metric("thumbd_disk_cache_faults_total{kind=\"no_space\"}") ?? 0) > 0
    }
    let health = String(
      decoding: SocketClient.get(daemon.socket, "/healthz").response, as: UTF8.self)
    #expect(health.contains("degraded: disk cache: no_space"))
    #expect((daemon.metric("thumbd_disk_cache_evictions_total") ?? 0) > 0)
    #expect(daemon.stop() == 0)
    #expect(daemon.log.contains("event=disk_cache_fault kind=no_space"))
    // The cache kept working: the last thumbnails made are on disk after a restart.
    daemon = try await TestDaemon.start(arguments, directory: directory)
    defer { daemon.stop() }
    let last = SocketClient.get(daemon.socket, Self.target(origin.url("/119.jpg"), size: 400))
    #expect(SocketClient.header("X-Thumbd-Cache", in: last.response) == "disk")
  }

  @Test(
    "a second daemon on the same cache directory is refused with a clear message; the first serves on"
  )
  func secondDaemon() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { origin.stop() }
    let first = try await TestDaemon.start(["--allow-private"])
    defer { first.stop() }
    let cache = first.directory + "/cache"
    let second = try await ChildProcess.runThumbd([
      "serve", "--socket", first.directory + "/second.sock", "--cache-dir", cache,
    ])
    #expect(second.status == 2, "what stops start-up exits 2")
    #expect(second.standardError.contains("is in use by another thumbd"))
    #expect(second.standardError.contains(cache))
    #expect(SocketClient.get(first.socket, Self.target(origin.url("/a.jpg"))).status == 200)
  }

  @Test(
    "a FIFO in place of a cache entry: no hang, a corrupt fault logged and counted, served anew")
  func fifoEntry() async throws {
    let origin = try LoopbackOrigin { _ in .init(body: Self.photo) }.start()
    defer { origin.stop() }
    let directory = TestDaemon.makeDirectory()
    var daemon = try await TestDaemon.start(["--allow-private"], directory: directory)
    #expect(SocketClient.get(daemon.socket, Self.target(origin.url("/a.jpg"))).status == 200)
    #expect(daemon.stop() == 0)  // drained: the entry is on disk
    daemon = try await TestDaemon.start(["--allow-private"], directory: directory)
    defer { daemon.stop() }
    let entries =
      (FileManager.default.enumerator(atPath: directory + "/cache")?.allObjects
      as? [String] ?? []).filter { $0.hasSuffix(".tdc") }
    #expect(entries.count == 1)
    let path = directory + "/cache/" + entries[0]
    unlink(path)
    #expect(mkfifo(path, 0o600) == 0)
    let again = SocketClient.get(daemon.socket, Self.target(origin.url("/a.jpg")))
    #expect(again.status == 200)
    #expect(SocketClient.header("X-Thumbd-Cache", in: again.response) == "miss")
    #expect(daemon.metric("thumbd_disk_cache_faults_total{kind=\"corrupt\"}") == 1)
    #expect(SocketClient.get(daemon.socket, "/healthz").status == 200)
    #expect(daemon.stop() == 0)
    #expect(daemon.log.contains("event=disk_cache_fault kind=corrupt"))
  }

  private static func run(_ argv: [String]) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: argv[0])
    process.arguments = Array(argv.dropFirst())
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
  }
}
