import Foundation
import ImagePipeline
import Testing
import ThumbWire

@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// `thumbd desktop` against GLib's own check: `gio info` reads `thumbnail::path` and
/// `thumbnail::is-valid` for each file, as Nautilus and Thunar's GLib do.
@Suite("Desktop thumbnail cache, checked by GLib")
struct DesktopCacheTests {
  /// A folder of corpus images (every format), damaged images and a text file, and a cache.
  struct Fixture {
    let root: String
    let photos: String
    let cacheHome: String
    var cache: String { cacheHome + "/thumbnails" }
    let images: [String]
    let broken: [String]
  }

  static func makeFixture() throws -> Fixture {
    let root = TestDaemon.makeDirectory()
    let photos = root + "/photos with spaces & more"
    try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
    var images: [String] = []
    let decodable =
      Corpus.entries(expected: "decode-ok").filter { $0.path.hasPrefix("photo/") }.prefix(12)
      + Corpus.formatEntries(expected: "decode-ok").prefix(24)
    for (index, entry) in decodable.enumerated() {
      let name = "\(index) #\(URL(fileURLWithPath: entry.path).lastPathComponent)"
      try FileManager.default.copyItem(atPath: Corpus.path(entry.path), toPath: photos + "/" + name)
      images.append(photos + "/" + name)
    }
    // Issue 52: a name that is not UTF-8 (Latin-1 "café"), which GLib names by its bytes
    // (`caf%E9`); placed last, so the tests that take the first images do not meet it.
    let latin1 = Array((photos + "/caf").utf8) + [0xE9] + Array(".jpg".utf8)
    guard ByteNames.write(Data(try Corpus.bytes("photo/coil/normal.jpg")), to: latin1) else {
      throw POSIXError(.EIO)
    }
    images.append(PathBytes.string(latin1))
    // Damaged images: the right magic, then nothing a decoder can use.
    var broken: [String] = []
    let jpeg = try Corpus.bytes("photo/coil/normal.jpg")
    for (name, bytes) in [
      ("cut.jpg", Array(jpeg.prefix(600))), ("magic.png", PNGChunks.signature + [0, 0, 0, 1]),
    ] {
      try Data(bytes).write(to: URL(fileURLWithPath: photos + "/" + name))
      broken.append(photos + "/" + name)
    }
    try Data("not an image".utf8).write(to: URL(fileURLWithPath: photos + "/notes.txt"))
    return Fixture(
      root: root, photos: photos, cacheHome: root + "/cache home", images: images, broken: broken)
  }

  /// `thumbd desktop` with the fixture's XDG_CACHE_HOME.
  static func desktop(_ fixture: Fixture, _ arguments: [String]) async throws
    -> ChildProcess.Outcome
  {
    try await ChildProcess.runThumbd(
      ["XDG_CACHE_HOME=" + fixture.cacheHome, ChildProcess.thumbd, "desktop"] + arguments,
      binary: "/usr/bin/env")
  }

  /// What GLib says of each file: (uri, thumbnail::path, thumbnail::is-valid).
  static func glib(_ fixture: Fixture, _ files: [String]) async throws
    -> [String: (uri: String, path: String?, valid: Bool?)]
  {
    let output = fixture.root + "/gio.txt"
    let run = try await ChildProcess.runThumbd(
      [
        "XDG_CACHE_HOME=" + fixture.cacheHome, "GIO_USE_VFS=local", "gio", "info", "-a",
        "standard::name,thumbnail::path,thumbnail::is-valid",
      ] + files, standardOutput: output, binary: "/usr/bin/env")
    #expect(run.status == 0, "\(run.standardError)")
    // Not UTF-8 where a name is not: the URIs read are percent-encoded.
    let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: output)), as: UTF8.self)
    var answers: [String: (uri: String, path: String?, valid: Bool?)] = [:]
    var uri = ""
    var index = -1
    for line in text.split(separator: "\n") {
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      if trimmed.hasPrefix("uri: ") {
        index += 1
        uri = String(trimmed.dropFirst(5))
        answers[files[index]] = (uri, nil, nil)
      } else if trimmed.hasPrefix("thumbnail::path: ") {
        answers[files[index]]?.path = String(trimmed.dropFirst(17))
      } else if trimmed.hasPrefix("thumbnail::is-valid: ") {
        answers[files[index]]?.valid = trimmed.hasSuffix("TRUE")
      }
    }
    #expect(index == files.count - 1, "\(text)")
    return answers
  }

  /// Width and height from a PNG's IHDR.
  static func pngSize(_ bytes: [UInt8]) -> (Int, Int)? {
    guard bytes.count > 24, bytes.starts(with: PNGChunks.signature) else { return nil }
    let word = { (at: Int) in bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
    return (word(16), word(20))
  }

  @Test(
    "every image gets a normal and a large entry GLib finds valid: MD5 name, PNG keys, integer MTime, within the flavor, 0600; broken ones get fail entries"
  )
  func fill() async throws {
    let fixture = try Self.makeFixture()
    defer { try? FileManager.default.removeItem(atPath: fixture.root) }
    let first = try await Self.desktop(fixture, [fixture.photos, "--flavors", "normal,large"])
    #expect(first.status == 1, "the broken files fail: \(first.standardError)")
    #expect(
      first.standardError.contains(
        "\(fixture.images.count) made, \(fixture.broken.count) failed"),
      "\(first.standardError)")
    #expect(first.standardError.contains("1 skipped (1 not images)"))
    let glib = try await Self.glib(fixture, fixture.images + fixture.broken)
    for image in fixture.images {
      let answer = try #require(glib[image])
      let name = FreedesktopCache.fileName(forURI: answer.uri)
      #expect(answer.path == fixture.cache + "/large/" + name, "\(image): \(answer)")
      #expect(answer.valid == true, "\(image)")
      var source = stat()
      #expect(PathBytes.withCString(image) { stat($0, &source) } == 0)
      for (flavor, side) in [("normal", 128), ("large", 256)] {
        let entry = fixture.cache + "/" + flavor + "/" + name
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: entry)))
        let size = try #require(Self.pngSize(bytes), "\(entry)")
        #expect(max(size.0, size.1) <= side && min(size.0, size.1) >= 1, "\(entry)")
        #expect(bytes[24] == 8 && bytes[28] == 0, "8-bit, not interlaced")
        let keys = try #require(FreedesktopCache.texts(ofEntry: entry))
        #expect(keys["Thumb::URI"] == answer.uri)
        #expect(keys["Thumb::MTime"] == String(source.st_mtim.tv_sec))
        #expect(keys["Thumb::Size"] == String(source.st_size))
        #expect(keys["Thumb::Mimetype"]?.hasPrefix("image/") == true)
        #expect(keys["Software"]?.hasPrefix("thumbd ") == true)
        var info = stat()
        #expect(stat(entry, &info) == 0 && info.st_mode & 0o777 == 0o600)
      }
    }
    for folder in [fixture.cache, fixture.cache + "/normal", fixture.cache + "/large"] {
      var info = stat()
      #expect(stat(folder, &info) == 0 && info.st_mode & 0o777 == 0o700, "\(folder)")
    }
    let failures = try FileManager.default.contentsOfDirectory(atPath: fixture.cache + "/fail")
    #expect(failures.count == 1 && failures[0].hasPrefix("thumbd-"))
    for file in fixture.broken {
      let uri = try #require(glib[file]).uri
      let entry =
        fixture.cache + "/fail/" + failures[0] + "/" + FreedesktopCache.fileName(forURI: uri)
      #expect(FileManager.default.fileExists(atPath: entry), "\(file)")
    }
    // Again: everything is valid already, and the failures are honoured.
    let second = try await Self.desktop(fixture, [fixture.photos, "--flavors", "normal,large"])
    #expect(second.status == 0, "\(second.standardError)")
    #expect(
      second.standardError.contains(
        "0 made, 0 failed, \(fixture.images.count + fixture.broken.count + 1) skipped"),
      "\(second.standardError)")
  }

  @Test(
    "a touched file is made anew; a stale entry another program left, and one with tumbler's fractional MTime, are replaced"
  )
  func freshness() async throws {
    let fixture = try Self.makeFixture()
    defer { try? FileManager.default.removeItem(atPath: fixture.root) }
    let files = Array(fixture.images.prefix(3))
    _ = try await Self.desktop(fixture, files + ["--flavors", "large"])
    let before = try await Self.glib(fixture, files)
    #expect(files.allSatisfy { before[$0]?.valid == true })
    // 1. touched: a new mtime, ten seconds on.
    var info = stat()
    stat(files[0], &info)
    var times = [
      timespec(tv_sec: info.st_mtim.tv_sec + 10, tv_nsec: 0),
      timespec(tv_sec: info.st_mtim.tv_sec + 10, tv_nsec: 0),
    ]
    #expect(utimensat(AT_FDCWD, files[0], &times, 0) == 0)
    // 2. and 3.: the same picture, with keys another program wrote.
    for (file, mtime) in [(files[1], "1"), (files[2], "\(Self.mtime(files[2])).123456")] {
      let uri = try #require(before[file]).uri
      let entry = fixture.cache + "/large/" + FreedesktopCache.fileName(forURI: uri)
      let png = try PNGChunks.stripped(
        Array(try Data(contentsOf: URL(fileURLWithPath: entry))), chunk: "tEXt")
      let keys = [("Thumb::URI", uri), ("Thumb::MTime", mtime), ("Software", "Tumbler")]
      let stale = try #require(
        PNGChunks.inserting(keys.compactMap { PNGChunks.text($0.0, $0.1) }, intoPNG: png))
      try Data(stale).write(to: URL(fileURLWithPath: entry))
    }
    let stale = try await Self.glib(fixture, files)
    #expect(files.allSatisfy { stale[$0]?.valid == false }, "\(stale)")
    let again = try await Self.desktop(fixture, files + ["--flavors", "large"])
    #expect(again.standardError.contains("3 made, 0 failed, 0 skipped"), "\(again.standardError)")
    let after = try await Self.glib(fixture, files)
    #expect(files.allSatisfy { after[$0]?.valid == true }, "\(after)")
    for file in files {
      let entry = try #require(after[file]?.path)
      #expect(FreedesktopCache.texts(ofEntry: entry)?["Thumb::MTime"] == String(Self.mtime(file)))
    }
  }

  static func mtime(_ path: String) -> Int {
    var info = stat()
    stat(path, &info)
    return Int(info.st_mtim.tv_sec)
  }

  @Test("special files and files in the cache are refused without reading them")
  func refusals() async throws {
    let fixture = try Self.makeFixture()
    defer { try? FileManager.default.removeItem(atPath: fixture.root) }
    let fifo = fixture.root + "/pipe.jpg"
    mkfifo(fifo, 0o600)
    _ = try await Self.desktop(fixture, [fixture.images[0], "--flavors", "normal"])
    let entries = try FileManager.default.contentsOfDirectory(atPath: fixture.cache + "/normal")
    let inCache = fixture.cache + "/normal/" + entries[0]
    let run = try await Self.desktop(fixture, [fifo, "/proc/self/status", inCache, "-q"])
    // The byte cap holds before any byte is read: the same file under a cap below its size.
    let capped = try await Self.desktop(
      fixture, [fixture.images[1], "--max-source-bytes", "1k", "--flavors", "large"])
    #expect(capped.status == 1)
    #expect(
      capped.standardError.contains(": source_too_large: the file is larger than 1024 bytes"),
      "\(capped.standardError)")
    #expect(run.status == 1)
    #expect(run.standardError.contains("pipe.jpg: io: not a regular file"), "\(run.standardError)")
    #expect(run.standardError.contains("/proc/self/status: io: a file of /proc"))
    #expect(run.standardError.contains(": not_allowed: the file is in a thumbnail cache"))
  }
}

/// `thumbd desktop` and the installed thumbnailers (issue 53).
@Suite("Desktop cache: installed thumbnailers")
struct DesktopCacheDelegationTests {
  @Test(
    "the CLI makes PPM and TGA thumbnails through Debian's gdk-pixbuf entry in the sandbox; GLib finds them valid"
  )
  func delegatedTypes() async throws {
    let root = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let folder = root + "/scans"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    // Reachable by the sandbox's user when the tests run as root.
    chmod(root, 0o755)
    chmod(folder, 0o755)
    let bmp = folder + "/page one.ppm"
    try Data(DelegatedFixtures.ppm(width: 300, height: 200)).write(to: URL(fileURLWithPath: bmp))
    let tiff = folder + "/page two.tga"
    try Data(DelegatedFixtures.tga(width: 200, height: 300)).write(to: URL(fileURLWithPath: tiff))
    for file in [bmp, tiff] { chmod(file, 0o644) }
    let fixture = DesktopCacheTests.Fixture(
      root: root, photos: folder, cacheHome: root + "/cache home", images: [bmp, tiff], broken: [])
    let run = try await DesktopCacheTests.desktop(fixture, [folder, "--flavors", "normal,large"])
    #expect(run.status == 0, "\(run.standardError)")
    #expect(run.standardError.contains("2 made, 0 failed"), "\(run.standardError)")
    let glib = try await DesktopCacheTests.glib(fixture, [bmp, tiff])
    for (file, type, shape) in [
      (bmp, "image/x-portable-pixmap", (256, 171)), (tiff, "image/x-tga", (171, 256)),
    ] {
      let answer = try #require(glib[file])
      #expect(answer.valid == true, "\(file): \(answer)")
      let entry = fixture.cache + "/large/" + FreedesktopCache.fileName(forURI: answer.uri)
      let keys = try #require(FreedesktopCache.texts(ofEntry: entry))
      #expect(keys["Thumb::Mimetype"] == type)
      let picture = try Thumbnailer().decodeFullResolution(.path(entry))
      #expect((picture.width, picture.height) == shape)
    }
  }

  @Test(
    "a file the sandbox's user cannot read: under root refused as unreadable, with no fail entry; under its own user made"
  )
  func unreachableUnderRoot() async throws {
    let root = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let folder = root + "/private"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    chmod(root, 0o755)
    chmod(folder, 0o700)
    let bmp = folder + "/own.ppm"
    try Data(DelegatedFixtures.ppm(width: 64, height: 64)).write(to: URL(fileURLWithPath: bmp))
    chmod(bmp, 0o600)
    let fixture = DesktopCacheTests.Fixture(
      root: root, photos: folder, cacheHome: root + "/cache home", images: [bmp], broken: [])
    let run = try await DesktopCacheTests.desktop(fixture, [bmp])
    if getuid() == 0 {
      #expect(run.status == 1)
      #expect(run.standardError.contains("cannot read this file"), "\(run.standardError)")
      #expect(!FileManager.default.fileExists(atPath: fixture.cache + "/fail"))
    } else {
      #expect(run.status == 0, "\(run.standardError)")
    }
  }
}
