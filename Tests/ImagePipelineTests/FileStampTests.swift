import Foundation
import ImagePipeline
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The stamp a `file://` source is checked by on every request: what moves it, and when one
/// `stat` may serve several requests.
@Suite("File stamps")
struct FileStampTests {
  let root: String
  let loader: SourceLoader

  init() throws {
    root =
      FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-stamps-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    loader = SourceLoader(policy: SourcePolicy(allowedSchemes: ["file"], fileRoots: [root]))
  }

  func write(_ name: String, _ text: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: root + "/" + name))
  }

  @Test(
    "a load's version and a later stat agree until the file changes: in place, by rename, with the mtime put back"
  )
  func stampMoves() async throws {
    try write("a.txt", "first")
    let url = "file://\(root)/a.txt"
    guard case .modified(_, let version) = try await loader.load(SourceRequest(url: url)) else {
      Issue.record("a first load must bring bytes")
      return
    }
    #expect(loader.currentValidator(of: url, notBefore: .now) == version.validator)
    // Unchanged: a conditional load reads nothing.
    guard
      case .notModified = try await loader.load(SourceRequest(url: url, cached: version.validator))
    else {
      Issue.record("an unchanged file must answer not modified")
      return
    }
    var info = stat()
    stat(root + "/a.txt", &info)
    try write("a.txt", "other")  // same size
    var times = [info.st_mtim, info.st_mtim]
    utimensat(AT_FDCWD, root + "/a.txt", &times, 0)
    #expect(loader.currentValidator(of: url, notBefore: .now) != version.validator)
    let renamedOver = loader.currentValidator(of: url, notBefore: .now)
    try write("b.txt", "other")
    #expect(rename(root + "/b.txt", root + "/a.txt") == 0)
    #expect(loader.currentValidator(of: url, notBefore: .now) != renamedOver)
    unlink(root + "/a.txt")
    #expect(loader.currentValidator(of: url, notBefore: .now) == nil)
  }

  @Test("a stat is reused only by requests that arrived before it was made")
  func reuseRespectsArrival() throws {
    try write("c.txt", "one")
    let url = "file://\(root)/c.txt"
    let arrivedEarly = ContinuousClock.now
    let first = loader.currentValidator(of: url, notBefore: arrivedEarly)
    try write("c.txt", "twotwo")
    // A request that had arrived before the first stat may take it...
    #expect(loader.currentValidator(of: url, notBefore: arrivedEarly) == first)
    // ...one that arrived after the change may not.
    let second = loader.currentValidator(of: url, notBefore: .now)
    #expect(second != first && second != nil)
  }
}

/// A file caught between its truncation and its write (issue 52's outside run): the read
/// finds it empty, and the write lands before the decode fails.
@Suite("A failure as fresh as the file")
struct TornFileReadTests {
  /// A file whose first read is empty (stamped as empty) and whose write lands right after
  /// that read: every later read and stat sees the whole picture.
  final class RewrittenFile: DataLoading {
    let picture: [UInt8]
    let reads = Mutex(0)

    init(picture: [UInt8]) { self.picture = picture }

    static func stamp(size: Int) -> FileStamp {
      FileStamp(
        device: 1, inode: 7, size: Int64(size), modifiedNanoseconds: 5, changedNanoseconds: 5)
    }

    var current: FileStamp { Self.stamp(size: reads.withLock { $0 } == 0 ? 0 : picture.count) }

    func load(_ request: SourceRequest) async throws -> SourceResponse {
      let first = reads.withLock { count in
        count += 1
        return count == 1
      }
      let bytes = first ? [] : picture
      return .modified(
        bytes,
        SourceVersion(
          validator: .file(Self.stamp(size: bytes.count)), digest: UInt64(bytes.count),
          freshness: .forever))
    }

    func currentValidator(of url: String, notBefore: ContinuousClock.Instant) -> SourceValidator? {
      .file(current)
    }
  }

  @Test(
    "a decode that failed on a file changed since its read reads it again: the answer is the new picture"
  )
  func tornReadIsReadAgain() async throws {
    let picture = try ImageEncoder.png(
      Bitmap(pixels: [UInt8](repeating: 90, count: 40 * 20 * 3), width: 40, height: 20, channels: 3)
    )
    let file = RewrittenFile(picture: picture)
    let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: file))
    let response = try await pipeline.response(
      for: ImageRequest(
        url: "file:///pictures/a.png", spec: .known(ThumbnailSpec(width: 20, height: 20))))
    #expect(response.thumbnail.width == 20 && response.thumbnail.height == 10)
    #expect(file.reads.withLock { $0 } == 2)
  }

  @Test("a file that stays empty fails as empty, after one read")
  func emptyFileFails() async throws {
    final class Empty: DataLoading {
      func load(_ request: SourceRequest) async throws -> SourceResponse {
        .modified(
          [],
          SourceVersion(
            validator: .file(RewrittenFile.stamp(size: 0)), digest: 0, freshness: .forever))
      }
      func currentValidator(of url: String, notBefore: ContinuousClock.Instant) -> SourceValidator?
      {
        .file(RewrittenFile.stamp(size: 0))
      }
    }
    let pipeline = ThumbnailPipeline(configuration: .init(dataLoader: Empty()))
    await #expect(throws: PipelineError.self) {
      try await pipeline.response(
        for: ImageRequest(
          url: "file:///pictures/a.png", spec: .known(ThumbnailSpec(width: 20, height: 20)))
      )
    }
  }
}
