import Foundation
import Testing

@testable import ImagePipeline

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
    let cache = try DiskCache(directory: dir, sizeLimit: 1 << 20)
    await cache.store(payload: payload(1, 1000), metadata: [1, 2, 3], forKey: "https://x/a.jpg|64")
    let first = await cache.data(forKey: "https://x/a.jpg|64")
    #expect(first?.payload == payload(1, 1000) && first?.metadata == [1, 2, 3])
    let reopened = try DiskCache(directory: dir, sizeLimit: 1 << 20)
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
    let cache = try DiskCache(directory: dir, sizeLimit: limit)
    var generator = SeededGenerator(seed: 3)
    for step in 0..<600 {
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
    #expect(await cache.statistics.evictions > 0)
    // A restart with a smaller budget trims too.
    _ = try DiskCache(directory: dir, sizeLimit: limit / 3)
    #expect(bytesOnDisk(dir) <= limit / 3)
  }

  @Test("least recently used goes first, also across a restart")
  func lruAcrossRestart() async throws {
    let dir = directory()
    let entry = 10_000
    let cache = try DiskCache(directory: dir, sizeLimit: 3 * (entry + 100))
    for key in ["a", "b", "c"] { await cache.store(payload: payload(0, entry), forKey: key) }
    _ = await cache.data(forKey: "a")  // b is now the least recently used
    let smaller = try DiskCache(directory: dir, sizeLimit: 2 * (entry + 100))
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
    let cache = try DiskCache(directory: dir, sizeLimit: 1 << 20)
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/tmp").isEmpty)
    #expect(await cache.statistics.count == 0)
  }

  @Test(
    "concurrent writers and readers, in two cache instances on one directory, see whole entries")
  func concurrency() async throws {
    let dir = directory()
    let first = try DiskCache(directory: dir, sizeLimit: 4 << 20)
    let second = try DiskCache(directory: dir, sizeLimit: 4 << 20)
    try await withThrowingTaskGroup(of: Void.self) { group in
      for worker in 0..<8 {
        let cache = worker.isMultiple(of: 2) ? first : second
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
    let pid = try ChildProcess.spawnThumbd(
      ["warm"] + inputs + ["--cache-dir", dir, "--size", "1400x1400", "--format", "png"])
    // Watching another process's files is polling by nature; it runs on a thread of its own
    // so that other tests' blocking work on the cooperative pool cannot delay the kill.
    let status = await withCheckedContinuation { continuation in
      Thread.detachNewThread {
        while true {
          let files = FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? []
          if files.filter({ $0.hasSuffix(".tdc") }).count >= entriesBeforeKill { break }
          var status: Int32 = 0
          if waitpid(pid, &status, WNOHANG) == pid {
            continuation.resume(returning: status)  // finished before the kill: reported below
            return
          }
          usleep(500)
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
      let key = ThumbnailDiskFormat.key(
        for: ImageRequest(
          url: "file://" + URL(fileURLWithPath: path).standardizedFileURL.path, spec: spec))
      guard let entry = await cache.data(forKey: key) else { continue }
      let thumbnail = try #require(
        ThumbnailDiskFormat.thumbnail(metadata: entry.metadata, payload: entry.payload))
      let decoded = try Thumbnailer().decodeFullResolution(of: thumbnail.data)
      #expect(decoded.width == thumbnail.width && decoded.height == thumbnail.height)
      served += 1
    }
    #expect(served >= entriesBeforeKill)
    #expect(await cache.statistics.corruptions == 0)
  }
}
