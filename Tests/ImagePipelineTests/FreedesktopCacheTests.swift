import Foundation
import Testing
import ThumbSystem
import ThumbWire

@testable import ImagePipeline
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The desktop thumbnail cache's rules, without a desktop: names, keys, validity as GLib
/// judges it, and entries that are attacks.
@Suite("Freedesktop thumbnail cache")
struct FreedesktopCacheTests {
  static let software = "thumbd test"

  /// A PNG entry with these text keys before its image data.
  static func entry(_ keys: [(String, String)]) throws -> [UInt8] {
    let png = try Thumbnailer().thumbnail(
      .bytes(Corpus.bytes("png-valid/image-png/rgba.png")),
      spec: ValidSpec(ThumbnailSpec(width: 16, height: 16, format: .png))
    ).data
    return try #require(
      PNGChunks.inserting(keys.compactMap { PNGChunks.text($0.0, $0.1) }, intoPNG: png))
  }

  @Test("MD5 gives RFC 1321's test-suite digests")
  func md5() {
    let suite = [
      ("", "d41d8cd98f00b204e9800998ecf8427e"), ("a", "0cc175b9c0f1b6a831c399e269772661"),
      ("abc", "900150983cd24fb0d6963f7d28e17f72"),
      ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
      ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
      (
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        "d174ab98d277d9f5a5611c2c9f419d9f"
      ),
      (String(repeating: "1234567890", count: 8), "57edf4a22be3c955ac49da2e2107b67a"),
    ]
    for (text, digest) in suite { #expect(MD5.hex(text.utf8) == digest, "\(text)") }
    // The standard's own example.
    #expect(
      FreedesktopCache.fileName(forURI: "file:///home/jens/photos/me.png")
        == "c6ee772d9e49320e97ec29a7eb5b1697.png")
  }

  @Test("a file URI is percent-encoded as GLib writes it")
  func uris() {
    #expect(PercentEncoding.fileURI(path: "/a b/c#d%e?.jpg") == "file:///a%20b/c%23d%25e%3F.jpg")
    #expect(
      PercentEncoding.fileURI(path: "/x/!$&'()*+,:=@~_-.jpg") == "file:///x/!$&'()*+,:=@~_-.jpg")
    #expect(
      PercentEncoding.fileURI(path: "/é[]{}|^`\"<>;.jpg")
        == "file:///%C3%A9%5B%5D%7B%7D%7C%5E%60%22%3C%3E%3B.jpg")
  }

  @Test("the cache folder follows XDG_CACHE_HOME when absolute, else HOME")
  func directories() {
    #expect(
      FreedesktopCache.defaultDirectory(environment: ["XDG_CACHE_HOME": "/c", "HOME": "/h"])
        == "/c/thumbnails")
    #expect(
      FreedesktopCache.defaultDirectory(environment: ["XDG_CACHE_HOME": "rel", "HOME": "/h"])
        == "/h/.cache/thumbnails")
    #expect(FreedesktopCache.defaultDirectory(environment: [:]) == nil)
  }

  @Test("valid only with the same URI, an integer MTime equal to st_mtime, and Size when present")
  func validity() throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let source = FreedesktopCache.Source(path: "/p/a.jpg", modified: 1_700_000_000, size: 1234)
    let cases: [([(String, String)], Bool)] = [
      ([("Thumb::URI", source.uri), ("Thumb::MTime", "1700000000")], true),
      (
        [("Thumb::URI", source.uri), ("Thumb::MTime", "1700000000"), ("Thumb::Size", "1234")], true
      ),
      // tumbler's fractional seconds: GLib and KIO take it as stale.
      ([("Thumb::URI", source.uri), ("Thumb::MTime", "1700000000.123456")], false),
      ([("Thumb::URI", source.uri), ("Thumb::MTime", "1700000001")], false),
      ([("Thumb::URI", source.uri), ("Thumb::MTime", "+1700000000")], false),
      ([("Thumb::URI", source.uri), ("Thumb::MTime", "1700000000"), ("Thumb::Size", "99")], false),
      ([("Thumb::URI", "file:///p/b.jpg"), ("Thumb::MTime", "1700000000")], false),
      ([("Thumb::MTime", "1700000000")], false),
      // A key twice is not one value or the other.
      ([("Thumb::URI", source.uri), ("Thumb::MTime", "1700000000"), ("Thumb::MTime", "1")], false),
    ]
    for (index, (keys, valid)) in cases.enumerated() {
      let path = directory + "/\(index).png"
      try Data(Self.entry(keys)).write(to: URL(fileURLWithPath: path))
      #expect(
        FreedesktopCache.isValid(entry: path, for: source, uris: [source.uri]) == valid,
        "\(keys)")
    }
  }

  @Test(
    "hostile entries: links, FIFOs, folders, huge or endless text, bad CRCs are not valid, at once")
  func hostileEntries() throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let source = FreedesktopCache.Source(path: "/p/a.jpg", modified: 7, size: 1)
    let good = try Self.entry([("Thumb::URI", source.uri), ("Thumb::MTime", "7")])
    try Data(good).write(to: URL(fileURLWithPath: directory + "/good.png"))
    #expect(
      FreedesktopCache.isValid(entry: directory + "/good.png", for: source, uris: [source.uri]))
    // A link to a valid entry is not followed.
    symlink(directory + "/good.png", directory + "/link.png")
    mkfifo(directory + "/fifo.png", 0o600)
    mkdir(directory + "/folder.png", 0o700)
    var bad: [String: [UInt8]] = [:]
    var flipped = good
    flipped[40] ^= 0xFF
    bad["crc"] = flipped
    // Text past the head's limit, before any IDAT.
    let comment = try #require(PNGChunks.text("Comment", String(repeating: "x", count: 100_000)))
    let huge: [UInt8] = try #require(PNGChunks.inserting([comment], intoPNG: good))
    bad["huge"] = huge
    // A chunk that claims 2 GiB.
    bad["length"] = Array(good[..<33]) + [0x7F, 0xFF, 0xFF, 0xFF] + Array("tEXt".utf8)
    bad["no IDAT"] = Array(good[..<33]) + PNGChunks.chunk("IEND", [])
    bad["not PNG"] = Array("Thumb::URI".utf8)
    for (name, bytes) in bad {
      try Data(bytes).write(to: URL(fileURLWithPath: directory + "/\(name).png"))
    }
    // A valid head, but the file is larger than any thumbnail (sparse: no disk used).
    try Data(good).write(to: URL(fileURLWithPath: directory + "/vast.png"))
    #expect(truncate(directory + "/vast.png", off_t(FreedesktopCache.maxEntryBytes + 1)) == 0)
    let started = MonotonicClock.seconds()
    for name in ["link", "fifo", "folder", "vast"] + bad.keys.sorted() {
      #expect(
        !FreedesktopCache.isValid(
          entry: directory + "/\(name).png", for: source, uris: [source.uri]),
        "\(name)")
    }
    #expect(MonotonicClock.seconds() - started < 1)
  }

  @Test(
    "store writes the keys before IDAT, 0600 in 0700 folders; lookup finds it, then sees a change")
  func storeAndLookup() throws {
    let root = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let cache = FreedesktopCache(
      directory: root + "/new/.cache/thumbnails", software: Self.software)
    let source = FreedesktopCache.Source(path: "/p/a b.jpg", modified: 42, size: 10)
    #expect(cache.lookup(source, flavor: .large) == .missing)
    let png = try Thumbnailer().thumbnail(
      .bytes(Corpus.bytes("photo/coil/normal.jpg")),
      spec: ValidSpec(ThumbnailSpec(width: 256, height: 256, format: .png))
    ).data
    let path = try cache.store(png: png, for: source, flavor: .large, mediaType: "image/jpeg")
    #expect(
      path == root + "/new/.cache/thumbnails/large/" + MD5.hex("file:///p/a%20b.jpg".utf8) + ".png")
    #expect(cache.lookup(source, flavor: .large) == .thumbnail(path))
    #expect(cache.lookup(source, flavor: .normal) == .missing)
    let keys = try #require(FreedesktopCache.texts(ofEntry: path))
    #expect(keys["Thumb::MTime"] == "42" && keys["Thumb::Size"] == "10")
    #expect(keys["Thumb::Mimetype"] == "image/jpeg" && keys["Software"] == Self.software)
    for (folder, mode) in [
      (root + "/new/.cache", 0o700), (cache.directory, 0o700), (cache.directory + "/large", 0o700),
      (path, 0o600),
    ] {
      var info = stat()
      #expect(stat(folder, &info) == 0 && Int(info.st_mode & 0o7777) == mode, "\(folder)")
    }
    let touched = FreedesktopCache.Source(path: source.path, modified: 43, size: 10)
    #expect(cache.lookup(touched, flavor: .large) == .missing)
    try cache.storeFailure(for: touched)
    #expect(cache.lookup(touched, flavor: .large) == .failed)
    #expect(
      cache.lookup(
        FreedesktopCache.Source(path: source.path, modified: 44, size: 10), flavor: .large)
        == .missing)
  }

  /// Issue 52 (outside attack run): Cache1 `Delete` and `Cleanup` followed a flavor folder
  /// replaced by a link and unlinked files outside the cache; writes already refused it.
  @Test("Delete, Cleanup and Move do not follow a flavor or fail folder that is a link")
  func linkedFolders() throws {
    let root = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let cache = FreedesktopCache(directory: root + "/thumbnails", software: Self.software)
    let uri = "file:///p/victim.jpg"
    let outside = root + "/outside"
    try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(
      atPath: cache.directory + "/fail", withIntermediateDirectories: true)
    // Files an entry's name would hit, and one whose Thumb::URI lies under the cleaned base.
    let named = outside + "/" + FreedesktopCache.fileName(forURI: uri)
    let keyed = outside + "/other.png"
    try Data(Self.entry([("Thumb::URI", uri), ("Thumb::MTime", "1")])).write(
      to: URL(fileURLWithPath: named))
    try Data(Self.entry([("Thumb::URI", "file:///p/gone.jpg"), ("Thumb::MTime", "1")])).write(
      to: URL(fileURLWithPath: keyed))
    for flavor in FreedesktopCache.Flavor.allCases {
      #expect(symlink(outside, cache.directory + "/" + flavor.rawValue) == 0)
    }
    #expect(symlink(outside, cache.failureDirectory) == 0)
    cache.delete(uris: [uri])
    cache.cleanup(baseURIs: ["file:///p"], since: 1_000_000)
    cache.transfer(from: ["file:///p/gone.jpg"], to: ["file:///q/gone.jpg"], keepingOld: false)
    for path in [named, keyed] {
      #expect(FileManager.default.fileExists(atPath: path), "\(path) was removed through a link")
    }
  }

  @Test("a shared .sh_thumbnails entry beside the file is used, named by the file's name")
  func sharedRepository() throws {
    let root = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let cache = FreedesktopCache(directory: root + "/cache", software: Self.software)
    let source = FreedesktopCache.Source(path: root + "/photos/a b.jpg", modified: 5, size: 3)
    try FileManager.default.createDirectory(
      atPath: root + "/photos/.sh_thumbnails/normal", withIntermediateDirectories: true)
    let shared = root + "/photos/.sh_thumbnails/normal/" + MD5.hex("a%20b.jpg".utf8) + ".png"
    try Data(Self.entry([("Thumb::URI", "a%20b.jpg"), ("Thumb::MTime", "5")]))
      .write(to: URL(fileURLWithPath: shared))
    #expect(cache.lookup(source, flavor: .normal) == .thumbnail(shared))
    #expect(cache.lookup(source, flavor: .large) == .missing)
    #expect(cache.holds(shared) && cache.holds(cache.directory + "/normal/x.png"))
    #expect(!cache.holds(root + "/photos/a b.jpg"))
  }
}
