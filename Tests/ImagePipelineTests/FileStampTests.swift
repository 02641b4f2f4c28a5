import Foundation
import ImagePipeline
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
