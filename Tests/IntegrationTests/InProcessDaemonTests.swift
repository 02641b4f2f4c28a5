import Foundation
import ImagePipeline
import Testing
import ThumbServer

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// `Daemon` composes the same parts `thumbd serve` runs, in this process.
@Suite struct InProcessDaemonTests {
  @Test("a daemon built from a config answers health and a thumbnail from its file root, and stops")
  func composedDaemon() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let photo = directory + "/photo.jpg"
    try Data(Corpus.bytes("photo/coil/normal.jpg")).write(to: URL(fileURLWithPath: photo))
    let socket = directory + "/d.sock"
    guard
      case .serve(let config, _) = try ConfigLoader.load(
        arguments: [
          "--socket", socket, "--file-root", directory, "--allow-scheme", "file",
          "--cache-dir", "", "--log-level", "error",
        ], environment: [:])
    else {
      Issue.record("no config")
      return
    }
    let daemon = try Daemon(
      config: config, logger: Logger(level: .error, format: .logfmt, path: nil), version: "test")
    #expect(try daemon.listenOnConfiguredEndpoints() == [socket])
    daemon.start()
    defer {
      daemon.stop(drainTimeout: 1)
      daemon.server.wait()
    }
    var info = stat()
    #expect(stat(socket, &info) == 0 && info.st_mode & 0o777 == 0o660)
    let health = try await offPool { SocketClient.get(socket, "/healthz") }
    #expect(health.status == 200)
    let query = "/v1/thumbnail?url=file://\(photo)&w=64&h=64&format=png"
    let thumbnail = try await offPool { SocketClient.get(socket, query) }
    #expect(thumbnail.status == 200)
    #expect(SocketClient.header("x-thumbd-cache", in: thumbnail.response) == "miss")
    let again = try await offPool { SocketClient.get(socket, query) }
    #expect(SocketClient.header("x-thumbd-cache", in: again.response) == "memory")
    #expect(daemon.pipeline.metrics.snapshot().decodes == 1)
  }
}
