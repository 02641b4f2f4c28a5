import Foundation
import ImagePipeline
import Testing

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// README.md's quick start, run as written: the daemon command from its first block, then
/// every other block in a shell, each of which must succeed. The home folder is a temporary
/// one with a `Pictures` tree (a name with spaces, a nested folder, a name used twice), and
/// `scripts/run` runs the already built binary (`THUMBD_RUN_BINARY`): a build inside
/// `swift test` would wait for this one's lock.
@Suite("README quick start", .onLane(.clients))
struct ReadmeTests {
  /// The shell blocks of the `## Quick start` section, in order.
  static func quickStartBlocks() throws -> [String] {
    let readme = try String(contentsOfFile: Repository.root + "/README.md", encoding: .utf8)
    let start = try #require(readme.range(of: "\n## Quick start\n"))
    let rest = readme[start.upperBound...]
    let section = rest.range(of: "\n## ").map { rest[..<$0.lowerBound] } ?? rest
    var blocks: [String] = []
    var current: [Substring]?
    for line in section.split(separator: "\n", omittingEmptySubsequences: false) {
      if line == "```sh" {
        current = []
      } else if line == "```", let lines = current {
        blocks.append(lines.joined(separator: "\n"))
        current = nil
      } else {
        current?.append(line)
      }
    }
    return blocks
  }

  @Test("every command of the quick start succeeds on a local file root")
  func quickStart() async throws {
    let blocks = try Self.quickStartBlocks()
    #expect(blocks.count >= 3)
    let daemonCommand = try #require(blocks.first)
    #expect(daemonCommand.contains("serve") && !daemonCommand.contains("\n"))
    let base = TestDaemon.makeDirectory()
    let home = base + "/home"
    let checkout = base + "/checkout"
    let files = FileManager.default
    for directory in [
      home + "/Pictures/2024/day one", home + "/Pictures/old", base + "/run", base + "/cache",
      checkout + "/scripts",
    ] {
      try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }
    chmod(base + "/run", 0o700)
    try files.copyItem(
      atPath: Repository.root + "/scripts/run", toPath: checkout + "/scripts/run")
    let pictures = [
      ("photo/coil/normal.jpg", "2024/day one/IMG 0001.JPG"),
      ("photo/coil/normal.jpg", "old/IMG 0001.JPG"),
      ("png-valid/image-png/rgba.png", "2024/logo.png"),
      ("heif-valid/libheif/example.heic", "old/phone.heic"),
    ]
    for (source, name) in pictures {
      try files.copyItem(atPath: Corpus.path(source), toPath: home + "/Pictures/" + name)
    }
    let environment = [
      "HOME": home, "XDG_RUNTIME_DIR": base + "/run", "XDG_CACHE_HOME": base + "/cache",
      "THUMBD_RUN_BINARY": ChildProcess.thumbdFastest,
    ]
    let log = base + "/daemon.log"
    let daemon = try ChildProcess.spawn(
      ["/bin/bash", "-c", "cd \"$0\" && exec " + daemonCommand, checkout],
      standardError: log, environment: environment)
    defer {
      kill(daemon, SIGTERM)
      _ = ChildProcess.wait(daemon)
    }
    await eventually("the daemon answers") {
      SocketClient.get(base + "/run/thumbd.sock", "/healthz").status == 200
    }
    for block in blocks.dropFirst() {
      let errors = base + "/block.err"
      let shell = try ChildProcess.spawn(
        ["/bin/bash", "-e", "-c", "cd \"$0\"\n" + block, checkout], standardError: errors,
        environment: environment)
      let status = await ChildProcess.exit(of: shell)
      let said = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
      let daemonSaid = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
      #expect(status == 0, "\(block)\n\(said)\ndaemon: \(daemonSaid)")
    }
    let thumb = Array(try Data(contentsOf: URL(fileURLWithPath: checkout + "/thumb.jpg")))
    #expect(ImageFormat.sniff(thumb) == .jpeg)
    let made = try files.contentsOfDirectory(atPath: checkout + "/thumbs").sorted()
    #expect(made.count == pictures.count, "\(made)")
  }
}
