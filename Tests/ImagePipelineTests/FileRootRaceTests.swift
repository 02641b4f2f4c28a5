import Foundation
import Synchronization
import Testing

@testable import ImagePipeline
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// A `file://` root cannot be escaped by swapping a directory for a symlink between a check
/// and the open: there is no separate check, the open itself stays beneath the root. One race
/// at a time: each runs a thread that swaps without pause.
@Suite("File roots under a swap race", .serialized)
struct FileRootRaceTests {
  /// root/in/sub/photo.jpg holds "inside"; a swapper keeps replacing root/in/sub with a
  /// symlink to outside/sub, whose photo.jpg holds "outside", and putting it back.
  final class Scene: @unchecked Sendable {
    // @unchecked: the paths are immutable; `stop` is atomic.
    let base: String
    let root: String
    private let stop = Atomic<Bool>(false)
    private let swaps = Atomic<Int>(0)
    private let done = DispatchSemaphore(value: 0)

    init() throws {
      base =
        FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-race-\(UUID().uuidString.prefix(8))").path
      root = base + "/root"
      let files = FileManager.default
      try files.createDirectory(atPath: root + "/in/sub", withIntermediateDirectories: true)
      try files.createDirectory(atPath: base + "/outside/sub", withIntermediateDirectories: true)
      try Data("inside".utf8).write(to: URL(fileURLWithPath: root + "/in/sub/photo.jpg"))
      try Data("outside".utf8).write(to: URL(fileURLWithPath: base + "/outside/sub/photo.jpg"))
    }

    var url: String { "file://\(root)/in/sub/photo.jpg" }
    var swapCount: Int { swaps.load(ordering: .relaxed) }

    /// With `insideLinks`, every other swap puts an absolute symlink to the real directory
    /// (inside the root) in its place instead, so both ways of following a link race.
    func startSwapping(insideLinks: Bool = false) {
      let (sub, kept, outside) = (root + "/in/sub", root + "/in/sub.real", base + "/outside/sub")
      Thread.detachNewThread { [self] in
        // The swapper never waits: at the default priority it took a core for as long as the
        // loads ran, and beside the rest of the suite the loads (and every other test's
        // tasks) waited minutes for the rest. Niced, it takes what is left over, and still
        // swaps thousands of times during the loads (`swapCount`). Linux's nice is per thread.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        while !stop.load(ordering: .relaxed) {
          rename(sub, kept)
          symlink(outside, sub)
          unlink(sub)
          if insideLinks {
            symlink(kept, sub)
            unlink(sub)
          }
          rename(kept, sub)
          swaps.add(1, ordering: .relaxed)
        }
        done.signal()
      }
    }

    func finish() {
      stop.store(true, ordering: .relaxed)
      done.wait()
      try? FileManager.default.removeItem(atPath: base)
    }
  }

  /// Loads `count` times, 8 at a time, counting what came back.
  private func hammer(
    _ count: Int, _ load: @escaping @Sendable () async -> [UInt8]?
  ) async -> (inside: Int, outside: Int, refused: Int) {
    await withTaskGroup(of: [UInt8]?.self) { group in
      var results = (inside: 0, outside: 0, refused: 0)
      var started = 0
      func record(_ bytes: [UInt8]?) {
        switch bytes.map({ String(decoding: $0, as: UTF8.self) }) {
        case "inside": results.inside += 1
        case "outside": results.outside += 1
        default: results.refused += 1
        }
      }
      while started < min(8, count) {
        group.addTask { await load() }
        started += 1
      }
      while let bytes = await group.next() {
        record(bytes)
        if started < count {
          group.addTask { await load() }
          started += 1
        }
      }
      return results
    }
  }

  @Test("10,000 requests during continuous directory/symlink swapping serve nothing from outside")
  func openatBeneath() async throws {
    let scene = try Scene()
    let loader = SourceLoader(
      policy: SourcePolicy(allowedSchemes: ["file"], fileRoots: [scene.root]))
    scene.startSwapping()
    let url = scene.url
    let results = await hammer(10_000) { try? await loader.loadData(for: url) }
    scene.finish()
    #expect(results.outside == 0, "\(results.outside) requests served a file outside the root")
    #expect(results.inside > 0 && results.refused > 0, "the race never happened: \(results)")
    #expect(scene.swapCount > 100)
  }

  @Test("swapping between absolute links inside and outside the root serves nothing outside")
  func absoluteLinksRace() async throws {
    let scene = try Scene()
    let loader = SourceLoader(
      policy: SourcePolicy(allowedSchemes: ["file"], fileRoots: [scene.root]))
    scene.startSwapping(insideLinks: true)
    let url = scene.url
    let results = await hammer(10_000) { try? await loader.loadData(for: url) }
    scene.finish()
    #expect(results.outside == 0, "\(results.outside) requests served a file outside the root")
    #expect(results.inside > 0 && results.refused > 0, "the race never happened: \(results)")
  }

  @Test("the fallback walk without openat2 is just as confined")
  func walkFallback() async throws {
    let scene = try Scene()
    let files = FileDataLoader(roots: [scene.root], maxSourceBytes: 1 << 20, walkOnly: true)
    let path = scene.root + "/in/sub/photo.jpg"
    #expect(try files.load(path: path) == Array("inside".utf8))
    scene.startSwapping()
    let results = await hammer(5000) {
      await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: try? files.load(path: path)) }
      }
    }
    scene.finish()
    #expect(results.outside == 0, "\(results.outside) requests served a file outside the root")
    #expect(results.inside > 0 && results.refused > 0, "the race never happened: \(results)")
  }
}
