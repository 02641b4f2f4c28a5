import Foundation
import ImagePipeline
import Testing
import ThumbServer
import ThumbWire

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// `Daemon` composes the same parts `thumbd serve` runs, in this process: `TestDaemon`'s
/// in-process driver, from the same arguments through the same `ConfigLoader`. It answers as
/// the binary does and, stopped, lets go of everything it made (its threads end only when its
/// pipeline is freed).
@Suite(.onLane(.clients)) struct InProcessDaemonTests {
  @Test("a daemon built from a config answers health and a thumbnail from its file root, and stops")
  func composedDaemon() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let photo = directory + "/photo.jpg"
    try Data(Corpus.bytes("photo/coil/normal.jpg")).write(to: URL(fileURLWithPath: photo))
    try await withDaemon(
      .inProcess,
      [
        "--file-root", directory, "--allow-scheme", "file", "--cache-dir", "", "--log-level",
        "error",
      ]
    ) { daemon in
      let socket = daemon.socket
      var info = stat()
      #expect(stat(socket, &info) == 0 && info.st_mode & 0o777 == 0o660)
      // Off the cooperative pool: the daemon's misses run on it.
      let health = try await offPool { SocketClient.get(socket, "/healthz") }
      #expect(health.status == 200)
      let query = "/v1/thumbnail?url=file://\(photo)&w=64&h=64&format=png"
      let thumbnail = try await offPool { SocketClient.get(socket, query) }
      #expect(thumbnail.status == 200)
      #expect(SocketClient.header("x-thumbd-cache", in: thumbnail.response) == "miss")
      let again = try await offPool { SocketClient.get(socket, query) }
      #expect(SocketClient.header("x-thumbd-cache", in: again.response) == "memory")
      #expect(daemon.inProcessDaemon?.pipeline.metrics.snapshot().decodes == 1)
    }
  }

  @Test(
    "stopped, an in-process daemon's pipeline and disk cache are freed: no loop or kept response keeps them"
  )
  func freedWhenStopped() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let photo = directory + "/photo.jpg"
    let bytes = try Corpus.bytes("photo/coil/normal.jpg")
    try Data(bytes).write(to: URL(fileURLWithPath: photo))
    let origin = try LoopbackOrigin { _ in .init(body: bytes) }.start()
    defer { origin.stop() }
    // From a file root, and from an origin over HTTP (the fetcher's thread) on TCP.
    let sources = [
      ("file://" + photo, ["--file-root", directory, "--allow-scheme", "file"]),
      (origin.url("/photo.jpg"), ["--allow-private", "--listen", "127.0.0.1:0"]),
      (origin.url("/grouped.jpg"), ["--allow-private", "--max-variants-per-source", "3"]),
    ]
    for (index, (url, arguments)) in sources.enumerated() {
      let cache = directory + "/cache-\(index)"
      weak var pipeline: ThumbnailPipeline?
      do {
        let daemon = try await TestDaemon.start(
          arguments + ["--cache-dir", cache], driver: .inProcess, directory: directory)
        // A thumbnail twice: a miss that reaches the disk cache, then a memory hit whose
        // response a loop keeps (and whose checks reach the pipeline).
        let encoded = PercentEncoding.encode(url)
        let query = "/v1/thumbnail?url=\(encoded)&w=64&h=64&format=png"
        #expect(SocketClient.get(daemon.socket, query).status == 200, "\(url)")
        let again = SocketClient.get(daemon.socket, query)
        #expect(SocketClient.header("x-thumbd-cache", in: again.response) == "memory", "\(url)")
        pipeline = daemon.inProcessDaemon?.pipeline
        #expect(pipeline != nil)
        daemon.stop()
      }
      // A task the daemon started may hold it a moment longer; a cycle would hold it for ever.
      await eventually("the stopped daemon's pipeline is freed (\(url))") { pipeline == nil }
      // And with it the disk cache's lock (its queue may finish a write a moment later): a
      // restart in this process may open the folder.
      #expect(await reopenedCache(cache, sizeLimit: 1 << 20) != nil, "\(url)")
    }
  }

  @Test("a bad argument is refused in-process as the binary refuses it")
  func argumentsAsTheBinaryReadsThem() async throws {
    await #expect(throws: (any Error).self) {
      _ = try await TestDaemon.start(["--memory-budget", "lots"], driver: .inProcess)
    }
  }
}
