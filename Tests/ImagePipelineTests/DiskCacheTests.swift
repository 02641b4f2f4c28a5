import Foundation
import Testing
import ThumbSystem

@testable import ImagePipeline
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Size limit, atomicity, corruption detection and persistence of the disk cache.
@Suite("Disk cache")
struct DiskCacheTests {
  private func directory() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent(
      "thumbd-disk-\(UUID().uuidString)"
    ).path
  }

  /// Sum of entry file sizes actually on disk.
  private func bytesOnDisk(_ directory: String) -> Int {
    let files = FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []
    return files.filter { $0.hasSuffix(".tdc") }.reduce(0) { total, name in
      let size = (try? FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.size])
      return total + ((size as? Int) ?? 0)
    }
  }

  private func payload(_ seed: Int, _ size: Int) -> [UInt8] {
    (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed) }
  }

  @Test("entries round-trip and survive a restart")
  func persistence() async throws {
    let dir = directory()
    do {
      let cache = try DiskCache(directory: dir, sizeLimit: 1 << 20)
      await cache.store(
        payload: payload(1, 1000), metadata: [1, 2, 3], forKey: "https://x/a.jpg|64")
      let first = await cache.data(forKey: "https://x/a.jpg|64")
      #expect(first?.payload == payload(1, 1000) && first?.metadata == [1, 2, 3])
    }
    let reopened = try #require(await reopenedCache(dir, sizeLimit: 1 << 20))
    #expect(await reopened.data(forKey: "https://x/a.jpg|64")?.payload == payload(1, 1000))
    #expect(await reopened.data(forKey: "https://x/a.jpg|128") == nil)
    #expect(await reopened.statistics.count == 1)
  }

  @Test("file names never come from the URL")
  func hashedNames() async throws {
    let dir = directory()
    let cache = try DiskCache(directory: dir, sizeLimit: 1 << 20)
    await cache.store(payload: [1], forKey: "https://evil.example/../../etc/passwd?q=secret")
    let names = FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? []
    #expect(names.allSatisfy { !$0.contains("evil") && !$0.contains("passwd") })
  }

  @Test("the size limit holds after any sequence of stores and reads")
  func sizeLimit() async throws {
    let dir = directory()
    let limit = 50_000
    var cache: DiskCache? = try DiskCache(directory: dir, sizeLimit: limit)
    var generator = SeededRandom(seed: 3)
    for step in 0..<600 {
      guard let cache else { break }
      let key = "k\(Int.random(in: 0..<80, using: &generator))"
      if Bool.random(using: &generator) {
        await cache.store(
          payload: payload(step, Int.random(in: 1...9000, using: &generator)), forKey: key)
      } else {
        _ = await cache.data(forKey: key)
      }
      #expect(bytesOnDisk(dir) <= limit)
      #expect(await cache.statistics.totalBytes <= limit)
    }
    #expect(await cache!.statistics.evictions > 0)
    cache = nil
    // A restart with a smaller budget trims too.
    _ = await reopenedCache(dir, sizeLimit: limit / 3)
    #expect(bytesOnDisk(dir) <= limit / 3)
  }

  @Test("least recently used goes first, also across a restart")
  func lruAcrossRestart() async throws {
    let dir = directory()
    let entry = 10_000
    do {
      let cache = try DiskCache(directory: dir, sizeLimit: 3 * (entry + 100))
      for key in ["a", "b", "c"] { await cache.store(payload: payload(0, entry), forKey: key) }
      _ = await cache.data(forKey: "a")  // b is now the least recently used
    }
    let smaller = try #require(await reopenedCache(dir, sizeLimit: 2 * (entry + 100)))
    #expect(await smaller.data(forKey: "b") == nil)
    #expect(await smaller.data(forKey: "a") != nil)
    #expect(await smaller.data(forKey: "c") != nil)
  }

  @Test("a corrupted entry is detected, deleted and counted as a miss")
  func corruption() async throws {
    let dir = directory()
    let cache = try DiskCache(directory: dir, sizeLimit: 1 << 20)
    await cache.store(payload: payload(5, 4000), forKey: "victim")
    let files = (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? [])
      .filter { $0.hasSuffix(".tdc") }
    #expect(files.count == 1)
    let path = dir + "/" + files[0]
    var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    bytes[bytes.count - 100] ^= 0x01
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    #expect(await cache.data(forKey: "victim") == nil)
    #expect(await cache.statistics.corruptions == 1)
    #expect(!FileManager.default.fileExists(atPath: path))
    // A truncated file (a torn write from elsewhere) is just as unusable.
    await cache.store(payload: payload(6, 4000), forKey: "victim")
    try Data(bytes.prefix(50)).write(to: URL(fileURLWithPath: path))
    #expect(await cache.data(forKey: "victim") == nil)
  }

  @Test("leftover temporary files are swept at start and never served")
  func temporaryLeftovers() async throws {
    let dir = directory()
    _ = try DiskCache(directory: dir, sizeLimit: 1 << 20)
    try Data(payload(9, 500)).write(to: URL(fileURLWithPath: dir + "/tmp/entry-abc123"))
    let cache = try #require(await reopenedCache(dir, sizeLimit: 1 << 20))
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/tmp").isEmpty)
    #expect(await cache.statistics.count == 0)
  }

  @Test(
    "a second cache on a directory in use is refused; concurrent writers and readers see whole entries"
  )
  func concurrency() async throws {
    let dir = directory()
    let cache = try DiskCache(directory: dir, sizeLimit: 4 << 20)
    // Two caches would keep two indexes, break the size limit and sweep each other's
    // temporary files: the directory is locked, in this process as in any other.
    #expect(throws: DiskCacheError.inUse(dir)) { try DiskCache(directory: dir, sizeLimit: 4 << 20) }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for _ in 0..<8 {
        group.addTask {
          for round in 0..<50 {
            let key = "shared-\(round % 10)"
            let value = (0..<2000).map { UInt8(truncatingIfNeeded: $0 &+ round % 10) }
            await cache.store(payload: value, forKey: key)
            if let read = await cache.data(forKey: key) {
              #expect(read.payload == value, "a reader saw a mixed or partial entry")
            }
          }
        }
      }
      try await group.waitForAll()
    }
  }

  /// The single entry file of a cache directory.
  private func entryFile(_ dir: String) -> String {
    let files = (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? [])
      .filter { $0.hasSuffix(".tdc") }
    precondition(files.count == 1)
    return dir + "/" + files[0]
  }

  @Test("a FIFO, a symlink or a sparse 4 GiB file in place of an entry is a corrupt miss, not read")
  func hostileEntries() async throws {
    let dir = directory()
    let faults = Recorder<String>()
    let cache = try DiskCache(directory: dir, sizeLimit: 1 << 20) {
      faults.append($0.fault.rawValue)
    }
    let replacements: [(String) -> Void] = [
      { path in #expect(mkfifo(path, 0o600) == 0) },
      { path in #expect(symlink("/etc/passwd", path) == 0) },
      { path in
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(ftruncate(fd, 4 << 30) == 0)
        close(fd)
      },
    ]
    for (round, replace) in replacements.enumerated() {
      await cache.store(payload: payload(round, 3000), forKey: "victim")
      let path = entryFile(dir)
      unlink(path)
      replace(path)
      // A FIFO would block an open without O_NONBLOCK for ever; a sparse file would be read
      // whole: both are refused on what fstat says.
      #expect(await cache.data(forKey: "victim") == nil)
      #expect(!FileManager.default.fileExists(atPath: path))
    }
    #expect(await cache.statistics.corruptions == 3)
    #expect(faults.values == ["corrupt", "corrupt", "corrupt"])
  }
}

/// A real writer process (`thumbd warm`) killed with SIGKILL while it fills the cache.
@Suite("Disk cache crash safety")
struct DiskCacheCrashTests {
  @Test(
    "a writer killed with SIGKILL mid-write never leaves an entry that is later served",
    arguments: [1, 3, 6])
  func killedWriter(entriesBeforeKill: Int) async throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
      "thumbd-kill-\(UUID().uuidString)"
    ).path
    // Many large PNG outputs: each write takes long, so the kill often lands inside one, and
    // the run is far too long to finish before the kill, however loaded the machine.
    let sources = FileManager.default.temporaryDirectory.appendingPathComponent(
      "thumbd-kill-sources-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: sources, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: sources) }
    var inputs: [String] = []
    for copy in 0..<40 {
      for photo in ["photo/coil/normal.jpg", "photo/sdwebimage/TestJFIF.jpg"] {
        let path = sources.appendingPathComponent(
          "\(copy)-\(URL(fileURLWithPath: photo).lastPathComponent)"
        ).path
        try FileManager.default.copyItem(atPath: Corpus.path(photo), toPath: path)
        inputs.append(path)
      }
    }
    let spec = ThumbnailSpec(width: 1400, height: 1400, format: .png)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let pid = try ChildProcess.spawnThumbd(
      ["warm"] + inputs + ["--cache-dir", dir, "--size", "1400x1400", "--format", "png"])
    // Kills the writer as soon as the entries are in place: woken by each file the writer
    // renames into place, on a thread of its own so that other tests' blocking work on the
    // cooperative pool cannot delay the kill (the wait's bound is only for a writer that ends
    // early, which no file event tells).
    let status = await withCheckedContinuation { continuation in
      Thread.detachNewThread {
        let watch = FolderWatch(dir)
        while watch.count(suffix: ".tdc") < entriesBeforeKill {
          var status: Int32 = 0
          if waitpid(pid, &status, WNOHANG) == pid {
            continuation.resume(returning: status)  // finished before the kill: reported below
            return
          }
          watch.next(milliseconds: 100)
        }
        kill(pid, SIGKILL)
        continuation.resume(returning: ChildProcess.wait(pid))
      }
    }
    #expect(status & 0x7f == SIGKILL, "the writer must have been killed, not finished")

    let cache = try DiskCache(directory: dir, sizeLimit: 1 << 30)
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/tmp").isEmpty)
    var served = 0
    for path in inputs {
      let url = "file://" + URL(fileURLWithPath: path).standardizedFileURL.path
      let key = ThumbnailDiskFormat.key(
        for: ImageRequest(url: url, spec: .known(spec)), filter: Thumbnailer().filter)
      guard let entry = await cache.data(forKey: key, group: ThumbnailDiskFormat.group(for: url))
      else { continue }
      let thumbnail = try #require(
        ThumbnailDiskFormat.thumbnail(metadata: entry.metadata, payload: entry.payload))
      let decoded = try Thumbnailer().decodeFullResolution(.bytes(thumbnail.data))
      #expect(decoded.width == thumbnail.width && decoded.height == thumbnail.height)
      served += 1
    }
    #expect(served >= entriesBeforeKill)
    #expect(await cache.statistics.corruptions == 0)
  }
}
