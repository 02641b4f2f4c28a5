import Foundation
import Testing

@testable import ImagePipeline

#if canImport(Glibc)
  import Glibc
#endif

/// Links inside a `file://` root are followed, absolute or relative; links that leave it are
/// refused; a root is matched as configured and as resolved; a root that cannot be one says
/// why.
@Suite("File roots and links")
struct FileRootLinkTests {
  /// base/real/sub/a.jpg ("inside"), base/outside/secret.jpg ("outside"), base/link -> real,
  /// and links under real/ of every kind.
  final class Tree: Sendable {
    let base: String
    var real: String { base + "/real" }
    var link: String { base + "/link" }

    init() throws {
      base =
        FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-links-\(UUID().uuidString.prefix(8))").path
      let files = FileManager.default
      try files.createDirectory(atPath: base + "/real/sub", withIntermediateDirectories: true)
      try files.createDirectory(atPath: base + "/outside", withIntermediateDirectories: true)
      try Data("inside".utf8).write(to: URL(fileURLWithPath: base + "/real/sub/a.jpg"))
      try Data("outside".utf8).write(to: URL(fileURLWithPath: base + "/outside/secret.jpg"))
      let links = [
        ("real/absolute.jpg", base + "/real/sub/a.jpg"),
        ("real/relative.jpg", "sub/a.jpg"),
        ("real/out-and-back.jpg", "../real/sub/a.jpg"),
        ("real/through-root-link.jpg", base + "/link/sub/a.jpg"),
        ("real/absolute-dir", base + "/real/sub"),
        ("real/escape.jpg", base + "/outside/secret.jpg"),
        ("real/escape-relative.jpg", "../outside/secret.jpg"),
        ("real/escape-dir", base + "/outside"),
        ("real/fifo-link", base + "/real/fifo"),
        ("link", base + "/real"),
      ]
      for (name, target) in links {
        guard symlink(target, base + "/" + name) == 0 else { throw POSIXError(.EIO) }
      }
      guard mkfifo(base + "/real/fifo", 0o600) == 0 else { throw POSIXError(.EIO) }
    }

    deinit { try? FileManager.default.removeItem(atPath: base) }
  }

  private func load(_ loader: FileDataLoader, _ path: String) -> Result<String, FetchError> {
    do {
      return .success(String(decoding: try loader.load(path: path), as: UTF8.self))
    } catch {
      return .failure(error)
    }
  }

  @Test(
    "links that stay inside the root are served, absolute or relative",
    arguments: [
      "absolute.jpg", "relative.jpg", "out-and-back.jpg", "through-root-link.jpg",
      "absolute-dir/a.jpg",
    ])
  func insideLinks(name: String) throws {
    let tree = try Tree()
    let loader = FileDataLoader(roots: [tree.real], maxSourceBytes: 1 << 20)
    #expect(try load(loader, tree.real + "/" + name).get() == "inside")
  }

  @Test(
    "links that leave the root are refused, and a link to a FIFO never blocks",
    arguments: ["escape.jpg", "escape-relative.jpg", "escape-dir/secret.jpg", "fifo-link"])
  func escapes(name: String) throws {
    let tree = try Tree()
    let loader = FileDataLoader(roots: [tree.real], maxSourceBytes: 1 << 20)
    guard case .failure(let error) = load(loader, tree.real + "/" + name) else {
      Issue.record("\(name) was served")
      return
    }
    #expect(error.kind == "not_allowed", "\(name): \(error)")
  }

  @Test("without openat2 every link is refused, inside or not")
  func walkRefusesLinks() throws {
    let tree = try Tree()
    let loader = FileDataLoader(roots: [tree.real], maxSourceBytes: 1 << 20, walkOnly: true)
    #expect(try load(loader, tree.real + "/sub/a.jpg").get() == "inside")
    guard case .failure = load(loader, tree.real + "/absolute.jpg") else {
      Issue.record("the walk followed a link")
      return
    }
  }

  @Test("a root given through a link is matched in both spellings")
  func rootSpellings() async throws {
    let tree = try Tree()
    let loader = SourceLoader(
      policy: SourcePolicy(allowedSchemes: ["file"], fileRoots: [tree.link]))
    for spelling in [tree.link, tree.real] {
      let bytes = try await loader.loadData(for: "file://" + spelling + "/sub/a.jpg")
      #expect(String(decoding: bytes, as: UTF8.self) == "inside", "\(spelling)")
    }
    await #expect(throws: FetchError.self) {
      _ = try await loader.loadData(for: "file://" + tree.base + "/outside/secret.jpg")
    }
    #expect(SourcePolicy.describe(fileRoots: [tree.link]) == [tree.link + "->" + tree.real])
  }

  @Test("a root that is missing, not a directory or literal '~' says so, naming it")
  func unusableRoots() throws {
    let tree = try Tree()
    #expect(SourcePolicy.fileRootProblem(tree.real) == nil)
    #expect(SourcePolicy.fileRootProblem(tree.link) == nil)
    for root in ["~/Pictures", tree.base + "/missing", tree.real + "/sub/a.jpg"] {
      let problem = SourcePolicy.fileRootProblem(root)
      #expect(problem?.hasPrefix(root + ": ") == true, "\(root): \(problem ?? "accepted")")
    }
  }
}
