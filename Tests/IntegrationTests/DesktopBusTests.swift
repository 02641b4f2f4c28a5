import CSystem
import Foundation
import ImagePipeline
import Testing
import ThumbSystem
import ThumbWire

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// thumbd serving `org.freedesktop.thumbnails.Thumbnailer1` and `Cache1` on a private session
/// bus (its own dbus-daemon), driven by a client written from the specification
/// (Tests/Desktop/thumbnailer-client.py, over GLib's GDBus) that checks every thumbnail a
/// `Ready` names as the Thumbnail Managing Standard defines it.
@Suite("Desktop thumbnailer on D-Bus", .serialized, .onLane(.clients))
struct DesktopBusTests {
  /// A dbus-daemon, a thumbd serving on it, and the folders they use.
  final class Setup: Sendable {
    let directory: String
    let busPID: pid_t
    let address: String
    let daemon: TestDaemon?
    var thumbd: TestDaemon { daemon! }
    var cacheHome: String { directory + "/cache home" }
    var cache: String { cacheHome + "/thumbnails" }
    var files: String { directory + "/files" }

    /// A bus, and (unless `withDaemon` is false) thumbd serving on it with `extra` options.
    init(_ extra: [String] = [], withDaemon: Bool = true) async throws {
      directory = TestDaemon.makeDirectory()
      try FileManager.default.createDirectory(
        atPath: directory + "/files", withIntermediateDirectories: true)
      let socket = directory + "/bus"
      address = "unix:path=" + socket
      busPID = try DesktopBusTests.startBus(address, in: directory)
      await eventually("the bus listens") { DesktopBusTests.listens(socket) }
      daemon =
        withDaemon
        ? try await Self.thumbd(address, directory, cacheHome: directory + "/cache home", extra)
        : nil
    }

    /// thumbd on the bus at `address`, its socket in `directory`, writing the desktop cache
    /// of `cacheHome`.
    static func thumbd(
      _ address: String, _ directory: String, cacheHome: String, _ extra: [String] = []
    ) async throws -> TestDaemon {
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
      return try await TestDaemon.start(
        ["--dbus", address, "--decode-threads", "2"] + extra, directory: directory,
        environment: ["XDG_CACHE_HOME": cacheHome])
    }

    func stop() {
      daemon?.stop()
      kill(busPID, SIGKILL)  // a spawned child may inherit SIGTERM blocked
      _ = ChildProcess.wait(busPID)
      try? FileManager.default.removeItem(atPath: directory)
    }

    /// Hard links (or copies) of corpus files in `files`, named `prefix-N-<name>`.
    func link(_ relative: [String], prefix: String) throws -> [String] {
      try relative.enumerated().map { index, path in
        let name = "\(prefix)-\(index)-" + URL(fileURLWithPath: path).lastPathComponent
        let target = files + "/" + name
        if Glibc.link(Corpus.path(path), target) != 0 {
          try FileManager.default.copyItem(atPath: Corpus.path(path), toPath: target)
        }
        return target
      }
    }

    /// Runs the specification's client on `plan` (its requests in one caller's connection)
    /// and returns what it saw.
    func client(_ requests: [[String: Any]], name: String = "client") async throws -> Report {
      let plan = directory + "/\(name).json"
      let output = directory + "/\(name).out"
      let body: [String: Any] = ["cache": cache, "timeout": 300, "requests": requests]
      try JSONSerialization.data(withJSONObject: body).write(to: URL(fileURLWithPath: plan))
      let outcome = try await ChildProcess.runThumbd(
        [
          "DBUS_SESSION_BUS_ADDRESS=" + address, "GIO_USE_VFS=local",
          "XDG_CACHE_HOME=" + cacheHome, "/usr/bin/python3",
          Repository.root + "/Tests/Desktop/thumbnailer-client.py", plan,
        ], standardOutput: output, binary: "/usr/bin/env")
      #expect(outcome.status == 0, "client: \(outcome.standardError)")
      return try Report(Data(contentsOf: URL(fileURLWithPath: output)))
    }

    /// `gdbus call` of a Cache1 method with string-array arguments.
    func cacheCall(_ method: String, _ arrays: [[String]], _ extra: [String] = []) async throws {
      let literals = arrays.map { "[" + $0.map { "'\($0)'" }.joined(separator: ",") + "]" }
      let outcome = try await ChildProcess.runThumbd(
        [
          "DBUS_SESSION_BUS_ADDRESS=" + address, "gdbus", "call", "--session", "--dest",
          "org.freedesktop.thumbnails.Cache1", "--object-path",
          "/org/freedesktop/thumbnails/Cache1", "--method",
          "org.freedesktop.thumbnails.Cache1." + method,
        ] + literals + extra, binary: "/usr/bin/env")
      #expect(outcome.status == 0, "\(method): \(outcome.standardError)")
    }

    /// The entry of `path` in `flavor`.
    func entry(_ path: String, _ flavor: String = "normal") -> String {
      cache + "/" + flavor + "/" + FreedesktopCache.fileName(forURI: uri(path))
    }
  }

  /// What the client printed.
  struct Report {
    struct Request {
      let handle: Int
      let ready: [String]
      let errors: [(uri: String, code: Int, message: String)]
      let readyAtEnd: Int?
      let startedFirst: Bool
      let finishedLast: Bool
      var delivered: Int { ready.count + errors.count }
    }
    let requests: [String: Request]
    let problems: [String]

    init(_ data: Data) throws {
      let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
      problems = object["problems"] as? [String] ?? ["no problems list"]
      var requests: [String: Request] = [:]
      for (name, value) in object["requests"] as? [String: [String: Any]] ?? [:] {
        requests[name] = Request(
          handle: value["handle"] as? Int ?? 0, ready: value["ready"] as? [String] ?? [],
          errors: (value["errors"] as? [[String: Any]] ?? []).map {
            ($0["uri"] as? String ?? "", $0["code"] as? Int ?? -1, $0["message"] as? String ?? "")
          }, readyAtEnd: value["ready_at_end"] as? Int,
          startedFirst: value["started_first"] as? Bool ?? false,
          finishedLast: value["finished_last"] as? Bool ?? false)
      }
      self.requests = requests
    }
  }

  /// Whether the bus accepts connections on `socket`: its file exists from `bind`, a moment
  /// before it listens, and a client connecting in that moment is refused.
  static func listens(_ socket: String) -> Bool {
    let fd = SocketClient.connect(socket)
    guard fd >= 0 else { return false }
    close(fd)
    return true
  }

  /// A session bus of its own at `address`: a config naming no service folder but `services`,
  /// so nothing installed on the machine (tumblerd) is activated behind the test's back.
  static func startBus(
    _ address: String, in directory: String, services: String? = nil,
    environment: [String: String] = [:]
  ) throws -> pid_t {
    let config = """
      <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
       "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
      <busconfig>
        <type>session</type>
        <listen>\(address)</listen>
        \(services.map { "<servicedir>\($0)</servicedir>" } ?? "")
        <policy context="default">
          <allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/>
        </policy>
      </busconfig>
      """
    try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
    return try ChildProcess.spawn(
      [
        "/usr/bin/dbus-daemon", "--config-file=" + directory + "/bus.conf", "--nofork",
        "--nopidfile",
      ],
      standardError: directory + "/dbus.log", environment: environment)
  }

  static func uri(_ path: String) -> String { PercentEncoding.fileURI(path: path) }

  static func request(
    _ name: String, _ paths: [String], flavor: String = "normal", scheduler: String = "default",
    extra: [String: Any] = [:]
  ) -> [String: Any] {
    ["name": name, "uris": paths.map(uri), "flavor": flavor, "scheduler": scheduler].merging(
      extra
    ) { $1 }
  }

  @Test(
    "every corpus file gets Ready or Error, then Finished; each thumbnail is as the standard says and failures leave fail entries"
  )
  func corpus() async throws {
    let setup = try await Setup()
    defer { setup.stop() }
    let decodable =
      Corpus.entries(expected: "decode-ok") + Corpus.formatEntries(expected: "decode-ok")
    let broken =
      Corpus.entries(expected: "must-reject") + Corpus.formatEntries(expected: "must-reject")
    let good = try setup.link(decodable.map(\.path), prefix: "ok")
    let bad = try setup.link(broken.map(\.path), prefix: "bad")
    for flavor in ["normal", "large"] {
      let report = try await setup.client([Self.request(flavor, good + bad, flavor: flavor)])
      #expect(report.problems.isEmpty, "\(report.problems.prefix(10))")
      let request = try #require(report.requests[flavor])
      #expect(request.startedFirst && request.finishedLast)
      let errors = Dictionary(request.errors.map { ($0.uri, $0) }) { first, _ in first }
      #expect(
        Set(request.ready) == Set(good.map(Self.uri)),
        "\(errors.filter { good.map(Self.uri).contains($0.key) }.prefix(5))")
      #expect(Set(errors.keys) == Set(bad.map(Self.uri)))
      #expect(request.delivered == good.count + bad.count, "each URI answered once")
      // A file that failed to decode is remembered as failed, for this version of it.
      let thumbd = try #require(
        try FileManager.default.contentsOfDirectory(atPath: setup.cache + "/fail").first {
          $0.hasPrefix("thumbd-")
        })
      let failures = setup.cache + "/fail/" + thumbd
      let decodeFailures = request.errors.filter { $0.code == 2 }
      #expect(decodeFailures.count > bad.count / 2)
      for failure in decodeFailures {
        #expect(
          FileManager.default.fileExists(
            atPath: failures + "/" + FreedesktopCache.fileName(forURI: failure.uri)),
          "no fail entry for \(failure.uri)")
      }
    }
  }

  /// Issue 52: a URI naming a file whose name is not UTF-8 (`caf%E9.jpg`, as GLib writes a
  /// Latin-1 name) was not taken for a local file.
  @Test(
    "a file whose name is not UTF-8 gets its thumbnail over the bus, beside the UTF-8 name that looks the same"
  )
  func nameThatIsNotUTF8() async throws {
    let setup = try await Setup()
    defer { setup.stop() }
    let stems: [[UInt8]] = [Array("caf".utf8) + [0xE9], Array("café".utf8), [0xFF]]
    var paths: [String] = []
    for stem in stems {
      let bytes = Array((setup.files + "/").utf8) + stem + Array(".jpg".utf8)
      #expect(ByteNames.write(Data(try Corpus.bytes("photo/coil/normal.jpg")), to: bytes))
      paths.append(PathBytes.string(bytes))
    }
    let report = try await setup.client([Self.request("names", paths)])
    #expect(report.problems.isEmpty, "\(report.problems.prefix(5))")
    let request = try #require(report.requests["names"])
    #expect(Set(request.ready) == Set(paths.map(Self.uri)), "\(request.errors)")
    #expect(Self.uri(paths[0]).hasSuffix("/caf%E9.jpg"))
    for path in paths {
      let keys = try #require(FreedesktopCache.texts(ofEntry: setup.entry(path)))
      #expect(keys["Thumb::URI"] == Self.uri(path))
    }
  }

  /// `thumbd_desktop_jobs_total` now.
  static func jobs(_ setup: Setup) -> Int {
    Int(setup.thumbd.metric("thumbd_desktop_jobs_total") ?? -1)
  }

  @Test(
    "Dequeue after 100 Ready of 2,000: at most one window (2 decode threads) of jobs runs past what was answered, and another caller's queue finishes untouched"
  )
  func cancellation() async throws {
    let setup = try await Setup()
    defer { setup.stop() }
    let photo = "photo/zune-image/medium_no_samp_2500x1786.jpg"
    let many = try setup.link(Array(repeating: photo, count: 2000), prefix: "many")
    let other = try setup.link(
      Array(repeating: "photo/coil/normal.jpg", count: 40), prefix: "other")
    // The other caller also wants ten of the first one's files: shared jobs go on for it.
    let shared = Array(many.suffix(10))
    async let first = setup.client(
      [Self.request("many", many, extra: ["dequeue_after": 100])], name: "first")
    async let second = setup.client(
      [Self.request("other", other + shared, scheduler: "background")], name: "second")
    let (mine, theirs) = try await (first, second)
    #expect(
      mine.problems.isEmpty && theirs.problems.isEmpty,
      "\(mine.problems.prefix(5)) \(theirs.problems.prefix(5))")
    let dequeued = try #require(mine.requests["many"])
    let untouched = try #require(theirs.requests["other"])
    #expect(dequeued.readyAtEnd == 100 && dequeued.finishedLast)
    #expect(dequeued.ready.count < 2000 / 2, "dequeued long before the end")
    let missing = Set((other + shared).map(Self.uri)).subtracting(untouched.ready)
    #expect(
      missing.isEmpty && untouched.ready.count == other.count + shared.count
        && untouched.finishedLast,
      "missing \(missing.count): \(missing.prefix(3)), errors \(untouched.errors.prefix(3))")
    // Every job either answered a request or was running when the Dequeue came.
    let delivered = dequeued.delivered + untouched.delivered
    let jobs = Self.jobs(setup)
    #expect(
      jobs >= dequeued.ready.count - 10 && jobs <= delivered + 2,
      "\(jobs) jobs for \(delivered) answers")
  }

  @Test(
    "handle_to_unqueue replaces a request in the same call: the old one gets Finished, the new one every Ready, and jobs stay within one window"
  )
  func replace() async throws {
    let setup = try await Setup()
    defer { setup.stop() }
    let photo = "photo/zune-image/medium_no_samp_2500x1786.jpg"
    let old = try setup.link(Array(repeating: photo, count: 2000), prefix: "old")
    let new = try setup.link(Array(repeating: "photo/coil/normal.jpg", count: 30), prefix: "new")
    let report = try await setup.client([
      Self.request(
        "old", old, scheduler: "foreground",
        extra: ["replace_after": 100, "replace": Self.request("new", new, scheduler: "foreground")])
    ])
    #expect(report.problems.isEmpty, "\(report.problems.prefix(5))")
    let replaced = try #require(report.requests["old"])
    let replacement = try #require(report.requests["new"])
    #expect(replaced.readyAtEnd == 100 && replaced.finishedLast && replaced.ready.count < 1000)
    #expect(Set(replacement.ready) == Set(new.map(Self.uri)) && replacement.finishedLast)
    let jobs = Self.jobs(setup)
    #expect(jobs <= replaced.delivered + replacement.delivered + 2, "\(jobs) jobs")
  }

  @Test(
    "freshness: a touched file is thumbnailed anew, a stale entry another program left is replaced, and tumbler's fractional MTime is rewritten as an integer"
  )
  func freshness() async throws {
    let setup = try await Setup()
    defer { setup.stop() }
    let files = try setup.link(["photo/coil/normal.jpg", "photo/coil/large.jpg"], prefix: "f")
    let touched = setup.files + "/touched.jpg"
    try FileManager.default.copyItem(
      atPath: Corpus.path("photo/exif-samples/jolla.jpg"), toPath: touched)
    let first = try await setup.client([Self.request("first", files + [touched])], name: "first")
    #expect(first.problems.isEmpty && first.requests["first"]?.ready.count == 3)
    // Touched: a new modification time, so the entry is stale until made again.
    var times = [
      timeval(tv_sec: 1_800_000_000, tv_usec: 0), timeval(tv_sec: 1_800_000_000, tv_usec: 0),
    ]
    #expect(utimes(touched, &times) == 0)
    // Another program's stale entry (a wrong MTime), and one tumbler wrote (seconds.micros).
    let entry = try [UInt8](Data(contentsOf: URL(fileURLWithPath: setup.entry(files[0]))))
    let image = try #require(PNGChunks.removingTexts(fromPNG: entry))
    for (path, mtime) in [(files[0], "1600000000"), (files[1], "\(Self.mtime(files[1])).250000")] {
      let keys = [("Thumb::URI", Self.uri(path)), ("Thumb::MTime", mtime), ("Software", "other")]
      let bytes = try #require(
        PNGChunks.inserting(keys.compactMap { PNGChunks.text($0.0, $0.1) }, intoPNG: image))
      try Data(bytes).write(to: URL(fileURLWithPath: setup.entry(path)))
    }
    let jobsBefore = Self.jobs(setup)
    let second = try await setup.client([Self.request("second", files + [touched])], name: "second")
    // The client checks each entry's MTime is the integer st_mtime, and GLib takes it as valid.
    #expect(second.problems.isEmpty, "\(second.problems)")
    #expect(second.requests["second"]?.ready.count == 3)
    #expect(Self.jobs(setup) == jobsBefore + 3, "all three made again")
    for path in files + [touched] {
      let keys = try #require(FreedesktopCache.texts(ofEntry: setup.entry(path)))
      #expect(
        keys["Thumb::MTime"] == String(Self.mtime(path))
          && keys["Software"]?.hasPrefix("thumbd") == true)
    }
    // Valid now: answered from the cache, no job.
    let third = try await setup.client([Self.request("third", files + [touched])], name: "third")
    #expect(third.requests["third"]?.ready.count == 3 && Self.jobs(setup) == jobsBefore + 3)
  }

  static func mtime(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_mtim.tv_sec) : -1
  }

  @Test(
    "Cache1: Move and Copy carry entries to the new URIs (files and folders), Delete and Cleanup remove them"
  )
  func cacheOperations() async throws {
    let setup = try await Setup()
    defer { setup.stop() }
    let folder = setup.files + "/album"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    var paths: [String] = []
    for (index, relative) in [
      "photo/coil/normal.jpg", "photo/coil/large.jpg", "photo/exif-samples/jolla.jpg",
      "png-valid/image-png/rgba.png",
    ].enumerated() {
      let target = (index < 2 ? folder : setup.files) + "/\(index).\(relative.suffix(3))"
      try FileManager.default.copyItem(atPath: Corpus.path(relative), toPath: target)
      paths.append(target)
    }
    let made = try await setup.client([Self.request("made", paths)], name: "made")
    #expect(made.requests["made"]?.ready.count == 4)
    // A file renamed: the entry follows (a rename keeps the modification time).
    let moved = setup.files + "/moved.jpg"
    #expect(rename(paths[2], moved) == 0)
    try await setup.cacheCall("Move", [[Self.uri(paths[2])], [Self.uri(moved)]])
    #expect(!FileManager.default.fileExists(atPath: setup.entry(paths[2])))
    let movedEntry = try #require(FreedesktopCache.texts(ofEntry: setup.entry(moved)))
    #expect(
      movedEntry["Thumb::URI"] == Self.uri(moved)
        && movedEntry["Thumb::MTime"] == String(Self.mtime(moved)))
    // A folder renamed: every entry below it follows.
    let renamed = setup.files + "/album 2"
    #expect(rename(folder, renamed) == 0)
    try await setup.cacheCall("Move", [[Self.uri(folder)], [Self.uri(renamed)]])
    let inside = paths[..<2].map { renamed + "/" + URL(fileURLWithPath: $0).lastPathComponent }
    for (old, new) in zip(paths[..<2], inside) {
      #expect(!FileManager.default.fileExists(atPath: setup.entry(old)))
      #expect(FreedesktopCache.texts(ofEntry: setup.entry(new))?["Thumb::URI"] == Self.uri(new))
    }
    // A copy (new modification time, same size): an entry of its own; the original's stays.
    let copy = setup.files + "/copy.png"
    try FileManager.default.copyItem(atPath: paths[3], toPath: copy)
    try await setup.cacheCall("Copy", [[Self.uri(paths[3])], [Self.uri(copy)]])
    #expect(
      FreedesktopCache.texts(ofEntry: setup.entry(copy))?["Thumb::MTime"]
        == String(Self.mtime(copy)))
    #expect(FileManager.default.fileExists(atPath: setup.entry(paths[3])))
    // Every moved and copied entry is valid to GLib and to a client: answered with no job.
    let jobs = Self.jobs(setup)
    let again = try await setup.client(
      [Self.request("again", inside + [moved, copy])], name: "again")
    #expect(again.problems.isEmpty, "\(again.problems)")
    #expect(again.requests["again"]?.ready.count == 4 && Self.jobs(setup) == jobs)
    // Delete, and Cleanup of a folder whose file is gone.
    try await setup.cacheCall("Delete", [[Self.uri(copy)]])
    #expect(!FileManager.default.fileExists(atPath: setup.entry(copy)))
    #expect(unlink(inside[0]) == 0)
    try await setup.cacheCall("Cleanup", [[Self.uri(renamed)]], ["0"])
    #expect(!FileManager.default.fileExists(atPath: setup.entry(inside[0])))
    #expect(FileManager.default.fileExists(atPath: setup.entry(inside[1])), "a valid entry stays")
  }

  @Test(
    "refused with tumbler's codes: remote URIs, FIFOs, devices, /proc, folders, files over the byte limit, thumbnails themselves, unknown flavors"
  )
  func refusals() async throws {
    let setup = try await Setup(["--max-source-bytes", "1MiB"])
    defer { setup.stop() }
    let fifo = setup.files + "/pipe.jpg"
    #expect(mkfifo(fifo, 0o600) == 0)
    let big = try setup.link(["photo/coil/large.jpg"], prefix: "big")[0]
    let fine = try setup.link(["photo/coil/normal.jpg"], prefix: "fine")[0]
    let first = try await setup.client([Self.request("fine", [fine])], name: "fine")
    #expect(first.requests["fine"]?.ready.count == 1)
    let uris = [
      "https://example.com/a.jpg", Self.uri(fifo), "file:///dev/zero", "file:///proc/self/environ",
      Self.uri(setup.files), Self.uri(big), Self.uri(setup.entry(fine)), "file://remote-host/a.jpg",
    ]
    let report = try await setup.client(
      [
        ["name": "bad", "uris": uris, "flavor": "normal", "scheduler": "default"],
        ["name": "flavor", "uris": [Self.uri(fine)], "flavor": "huge", "scheduler": "default"],
      ], name: "bad")
    let codes = Dictionary(
      uniqueKeysWithValues: (report.requests["bad"]?.errors ?? []).map { ($0.uri, $0.code) })
    #expect(
      codes == [
        uris[0]: 0, uris[1]: 1, uris[2]: 1, uris[3]: 1, uris[4]: 1, uris[5]: 0, uris[6]: 3,
        uris[7]: 0,
      ])
    #expect(report.requests["bad"]?.ready.isEmpty == true)
    #expect(report.requests["flavor"]?.errors.map(\.code) == [5])
    #expect(
      !FileManager.default.fileExists(atPath: setup.cache + "/fail"), "refusals are not failures")
  }

  @Test(
    "the shipped D-Bus activation files start thumbd on the first call (Cache1 or Thumbnailer1), with the systemd unit's command line, and it leaves when the bus does"
  )
  func activation() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let services = directory + "/services"
    try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: true)
    // The shipped files, with the binary under test in place of /usr/local/bin/thumbd.
    var lines: [String] = []
    for name in ["org.freedesktop.thumbnails.Thumbnailer1", "org.freedesktop.thumbnails.Cache1"] {
      let text = try String(
        contentsOfFile: Repository.root + "/Config/\(name).service", encoding: .utf8)
      #expect(
        text.contains("Name=\(name)\n") && text.contains("SystemdService=thumbd-desktop.service"))
      let exec = try #require(text.split(separator: "\n").first { $0.hasPrefix("Exec=") })
      lines.append(String(exec.dropFirst(5)))
      try text.replacing("/usr/local/bin/thumbd", with: ChildProcess.thumbd)
        .write(toFile: services + "/\(name).service", atomically: true, encoding: .utf8)
    }
    // The unit runs the same command (%t is the runtime directory).
    let unit = try String(
      contentsOfFile: Repository.root + "/Config/thumbd-desktop.service", encoding: .utf8)
    let start = try #require(unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
    #expect(
      lines[0] == lines[1]
        && String(start.dropFirst(10)).replacing("%t/", with: "${XDG_RUNTIME_DIR:-/tmp}/")
          == lines[0]
    )
    #expect(
      unit.contains("Type=dbus") && unit.contains("BusName=org.freedesktop.thumbnails.Thumbnailer1")
    )
    let address = "unix:path=" + directory + "/bus"
    let cacheHome = directory + "/cache home"
    let bus = try Self.startBus(
      address, in: directory, services: services,
      environment: [
        "XDG_RUNTIME_DIR": directory, "XDG_CACHE_HOME": cacheHome,
        "DBUS_SESSION_BUS_ADDRESS": address,
      ])
    defer {
      kill(bus, SIGKILL)
      _ = ChildProcess.wait(bus)
    }
    await eventually("the bus listens") { Self.listens(directory + "/bus") }
    // A Cache1 call starts it; a Queue through Thumbnailer1 then reaches the same process.
    let image = directory + "/photo.jpg"
    try FileManager.default.copyItem(atPath: Corpus.path("photo/coil/normal.jpg"), toPath: image)
    let delete = try await ChildProcess.runThumbd(
      [
        "DBUS_SESSION_BUS_ADDRESS=" + address, "gdbus", "call", "--session", "--dest",
        "org.freedesktop.thumbnails.Cache1", "--object-path", "/org/freedesktop/thumbnails/Cache1",
        "--method", "org.freedesktop.thumbnails.Cache1.Delete", "['\(Self.uri(image))']",
      ], binary: "/usr/bin/env")
    #expect(delete.status == 0, "\(delete.standardError)")
    let socket = directory + "/thumbd-desktop.sock"
    #expect(SocketClient.get(socket, "/healthz").status == 200, "the activated daemon answers")
    let plan = directory + "/plan.json"
    let body: [String: Any] = [
      "cache": cacheHome + "/thumbnails", "timeout": 120,
      "requests": [Self.request("one", [image])],
    ]
    try JSONSerialization.data(withJSONObject: body).write(to: URL(fileURLWithPath: plan))
    let output = directory + "/out.json"
    let outcome = try await ChildProcess.runThumbd(
      [
        "DBUS_SESSION_BUS_ADDRESS=" + address, "GIO_USE_VFS=local", "XDG_CACHE_HOME=" + cacheHome,
        "/usr/bin/python3", Repository.root + "/Tests/Desktop/thumbnailer-client.py", plan,
      ], standardOutput: output, binary: "/usr/bin/env")
    let report = try Report(Data(contentsOf: URL(fileURLWithPath: output)))
    #expect(outcome.status == 0 && report.problems.isEmpty, "\(report.problems)")
    #expect(report.requests["one"]?.ready == [Self.uri(image)])
    // The session's bus goes away: so does the daemon.
    kill(bus, SIGKILL)
    await eventually("the activated daemon leaves with the bus") {
      SocketClient.get(socket, "/healthz").status != 200
    }
  }

  /// tumblerd (Debian's tumbler) on the setup's bus, with its cache; returns its pid once it
  /// owns the thumbnailer name.
  static func startTumbler(_ setup: Setup) async throws -> pid_t {
    let pid = try ChildProcess.spawn(
      ["/usr/lib/x86_64-linux-gnu/tumbler-1/tumblerd"],
      standardError: setup.directory + "/tumbler.log",
      environment: ["DBUS_SESSION_BUS_ADDRESS": setup.address, "XDG_CACHE_HOME": setup.cacheHome])
    await eventually("tumblerd owns the name") {
      let outcome = try? await ChildProcess.runThumbd(
        [
          "DBUS_SESSION_BUS_ADDRESS=" + setup.address, "gdbus", "call", "--session", "--dest",
          "org.freedesktop.thumbnails.Thumbnailer1", "--object-path",
          "/org/freedesktop/thumbnails/Thumbnailer1", "--method",
          "org.freedesktop.thumbnails.Thumbnailer1.GetFlavors",
        ], binary: "/usr/bin/env")
      return outcome?.status == 0
    }
    return pid
  }

  static func stopTumbler(_ pid: pid_t) {
    kill(pid, SIGKILL)
    _ = ChildProcess.wait(pid)
  }

  /// An entry's inode and modification time: unchanged when nobody wrote it again.
  static func identity(_ path: String) -> [Int] {
    var info = stat()
    guard stat(path, &info) == 0 else { return [] }
    return [Int(info.st_ino), Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec)]
  }

  @Test(
    "with tumblerd: thumbd will not start while tumbler owns the names, rewrites tumbler's fractional-MTime entries with integer ones, and tumbler then answers Ready for thumbd's entries without making them again"
  )
  func tumbler() async throws {
    let setup = try await Setup(withDaemon: false)
    defer { setup.stop() }
    // Copies with whole-second modification times. tumbler 4.18 compares Thumb::MTime as a
    // double with the file's st_mtime plus its microseconds, so it takes any standard
    // (integer) entry of a file with a sub-second time as stale and makes it again: its side
    // of the defect that has GLib and KIO reject its own entries. Whole seconds are what
    // cameras' FAT cards, archives and `cp -p` from such places give.
    var copies: [String] = []
    for (index, relative) in [
      "photo/coil/normal.jpg", "photo/exif-samples/jolla.jpg", "png-valid/image-png/rgba.png",
    ].enumerated() {
      let path = setup.files + "/\(index)-" + URL(fileURLWithPath: relative).lastPathComponent
      try FileManager.default.copyItem(atPath: Corpus.path(relative), toPath: path)
      var times = [
        timeval(tv_sec: 1_790_000_000, tv_usec: 0), timeval(tv_sec: 1_790_000_000, tv_usec: 0),
      ]
      #expect(utimes(path, &times) == 0)
      copies.append(path)
    }
    let old = Array(copies.prefix(2))
    let new = [copies[2]]
    var tumbler = try await Self.startTumbler(setup)
    // tumbler's own entries: GLib takes them as stale (the fractional MTime).
    let before = try await setup.client([Self.request("tumbler", old)], name: "tumbler")
    #expect(before.requests["tumbler"]?.ready.count == 2)
    #expect(before.problems.contains { $0.contains("Thumb::MTime") })
    // While tumbler owns the names, thumbd refuses to start, naming why.
    let refused = try await ChildProcess.runThumbd(
      [
        "XDG_CACHE_HOME=" + setup.cacheHome, ChildProcess.thumbd, "serve", "--socket",
        setup.directory + "/refused.sock", "--cache-dir", "", "--dbus", setup.address,
      ], binary: "/usr/bin/env")
    #expect(refused.status != 0 && refused.standardError.contains("owned by another program"))
    Self.stopTumbler(tumbler)
    // thumbd makes tumbler's two again (integer MTime; the client and GLib check them).
    let thumbd = try await Setup.thumbd(
      setup.address, setup.directory + "/thumbd", cacheHome: setup.cacheHome)
    let made = try await setup.client([Self.request("thumbd", old + new)], name: "thumbd")
    #expect(made.problems.isEmpty, "\(made.problems)")
    #expect(made.requests["thumbd"]?.ready.count == 3)
    #expect(Int(thumbd.metric("thumbd_desktop_jobs_total") ?? 0) == 3)
    thumbd.stop()
    // tumbler again: thumbd's entries are valid to it; it answers Ready and writes nothing.
    let entries = (old + new).map { setup.entry($0) }
    let identities = entries.map(Self.identity)
    tumbler = try await Self.startTumbler(setup)
    defer { Self.stopTumbler(tumbler) }
    let after = try await setup.client([Self.request("again", old + new)], name: "again")
    #expect(after.problems.isEmpty, "\(after.problems)")
    #expect(after.requests["again"]?.ready.count == 3)
    #expect(entries.map(Self.identity) == identities, "tumbler made them again")
  }

  /// Whether Thunar can be run under an X server here (not installed by scripts/bootstrap).
  static var thunarAvailable: Bool {
    ["/usr/bin/thunar", "/usr/bin/Xvfb", "/usr/bin/import"].allSatisfy {
      FileManager.default.isExecutableFile(atPath: $0)
    }
  }

  @Test(
    "Thunar, the real file manager, under Xvfb: every file of a mixed folder (the six native types, video, PDF, SVG, TIFF, BMP, ICO, JPEG XL, RAW, a font) gets its thumbnail from thumbd as the session's Thumbnailer1",
    .enabled(if: thunarAvailable, "needs thunar, xvfb and imagemagick"))
  func thunar() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let output = directory + "/out.txt"
    let outcome = try await ChildProcess.runThumbd(
      [
        "THUMBD=" + ChildProcess.thumbdFastest, Repository.root + "/scripts/thunar-screenshot",
        directory + "/thunar.png",
      ], standardOutput: output, binary: "/usr/bin/env")
    let said = try String(contentsOfFile: output, encoding: .utf8)
    #expect(outcome.status == 0, "\(outcome.standardError)")
    // "thumbd made M of N, F failure entries; screenshot: PATH"
    let counts = (said.split(separator: ";").first ?? "").split(whereSeparator: { !$0.isNumber })
      .compactMap { Int($0) }
    #expect(
      counts.count == 3 && counts[0] == counts[1] && counts[1] >= 20 && counts[2] == 0, "\(said)")
    #expect(FileManager.default.fileExists(atPath: directory + "/thunar.png"))
    // Nothing of the run is left: Thunar and what its bus activated outlive their bus and X
    // server, spinning, unless the script ends them.
    let names: Set<String> = ["thunar", "tumblerd", "Xvfb", "xfconfd"]
    await eventually("nothing of the run left") { Self.processes(named: names).isEmpty }
    #expect(Self.processes(named: names).isEmpty, "\(Self.processes(named: names))")
  }

  /// The live processes (not zombies waiting to be reaped) whose command is one of `names`.
  static func processes(named names: Set<String>) -> [String] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.filter { $0.allSatisfy(\.isNumber) }.compactMap { pid in
      let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
        .trimmingCharacters(in: .whitespacesAndNewlines)
      let state = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?
        .split(separator: ")").last?.split(separator: " ").first
      guard let command, names.contains(command), state != "Z" else { return nil }
      return "\(command) \(pid)"
    }
  }
}

/// Installed thumbnailers through the service (issue 53): the types thumbd does not decode
/// go to the entries in the sandbox, and a hostile entry gets nowhere.
@Suite("Installed thumbnailers on D-Bus", .serialized, .onLane(.clients))
struct InstalledThumbnailersBusTests {
  /// A hostile "thumbnailer": the file to thumbnail is its own program (`python3 %i %o`).
  static let hostileEntry = """
    [Thumbnailer Entry]
    TryExec=/usr/bin/python3
    Exec=/usr/bin/python3 %i %o
    MimeType=application/x-thumbd-hostile;
    """

  /// Python that writes PNGs: `png(width, height, rows)`.
  static let pngPrelude = """
    import struct, zlib, sys
    def png(width, height, rows):
        def chunk(kind, data):
            return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
        return (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0))
                + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))

    """

  /// The hostile programs: each tries its escape, then writes what it writes.
  static func hostile(secret: String, port: Int32) -> [String: String] {
    let png = pngPrelude
    return [
      "secret": png + """
        try:
            data = open('\(secret)', 'rb').read()
        except Exception as e:
            data = repr(e).encode()
        open(sys.argv[1], 'wb').write(data)
        """,
      "network": png + """
        import socket
        try:
            socket.create_connection(('127.0.0.1', \(port)), timeout=1)
        except Exception:
            pass
        sys.exit(1)
        """,
      "lying-header": png + """
        data = png(64, 64, b'\\0' * 100)
        open(sys.argv[1], 'wb').write(data)
        """,
      "huge": png + """
        data = png(60000, 60000, b'\\0' * 1000)
        open(sys.argv[1], 'wb').write(data)
        """,
      "fork-bomb": png + """
        import os
        for i in range(100000):
            try:
                os.fork()
            except OSError:
                break
        sys.exit(1)
        """,
      "link-out": png + """
        import os
        os.symlink('\(secret)', sys.argv[1])
        """,
    ]
  }

  /// A bus, thumbd on it reading thumbnailer entries from a folder of the test's own (and
  /// then, with `system`, /usr/share's), and the files' folder reachable by the sandbox's
  /// user (`nobody`, when the tests run as root).
  struct Bench {
    let setup: DesktopBusTests.Setup
    let daemon: TestDaemon
    /// The test's own `thumbnailers` folder.
    let entries: String

    func stop() {
      daemon.stop()
      setup.stop()
    }
  }

  /// `entries` (file name to text) installed, and thumbd started with `decodeThreads`.
  static func start(
    entries: [String: String], system: Bool = true, decodeThreads: Int = 2
  ) async throws -> Bench {
    let setup = try await DesktopBusTests.Setup(withDaemon: false)
    let share = setup.directory + "/share"
    let folder = share + "/thumbnailers"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    for (name, text) in entries {
      try text.write(toFile: folder + "/" + name, atomically: false, encoding: .utf8)
    }
    try FileManager.default.createDirectory(
      atPath: setup.directory + "/d", withIntermediateDirectories: true)
    let daemon = try await TestDaemon.start(
      ["--dbus", setup.address, "--decode-threads", String(decodeThreads)],
      directory: setup.directory + "/d",
      environment: [
        "XDG_CACHE_HOME": setup.cacheHome, "XDG_DATA_DIRS": share + (system ? ":/usr/share" : ""),
      ])
    chmod(setup.files, 0o755)
    chmod(setup.directory, 0o755)
    return Bench(setup: setup, daemon: daemon, entries: folder)
  }

  /// A well-behaved "thumbnailer" program: after `sleeping` seconds, an 8x8 grey PNG.
  static func picture(sleeping: Double = 0) -> String {
    pngPrelude + """
      import time
      time.sleep(\(sleeping))
      open(sys.argv[1], 'wb').write(png(8, 8, b''.join(b'\\0' + b'\\x80' * 24 for _ in range(8))))
      """
  }

  @Test(
    "a PPM goes to Debian's gdk-pixbuf entry in the sandbox and its entry is valid; a PDF and an SVG are thumbd's own; GetSupported lists both kinds"
  )
  func realEntry() async throws {
    let setup = try await DesktopBusTests.Setup()
    defer { setup.stop() }
    let bmp = setup.files + "/a scan.ppm"
    try Data(DelegatedFixtures.ppm(width: 300, height: 200)).write(to: URL(fileURLWithPath: bmp))
    // evince and gdk-pixbuf install entries for these too: thumbd's worker draws them.
    let pdf = setup.files + "/a page.pdf"
    try Data(DrawingFixtures.pdf(width: 600, height: 400)).write(to: URL(fileURLWithPath: pdf))
    let svg = setup.files + "/an icon.svg"
    try Data(DrawingFixtures.svg(width: 200, height: 100)).write(to: URL(fileURLWithPath: svg))
    for file in [bmp, pdf, svg] { chmod(file, 0o644) }
    chmod(setup.files, 0o755)
    chmod(setup.directory, 0o755)
    let report = try await setup.client([
      DesktopBusTests.request("bmp", [bmp], flavor: "large"),
      DesktopBusTests.request("drawings", [pdf, svg], flavor: "large"),
    ])
    #expect(report.problems.isEmpty, "\(report.problems)")
    let request = try #require(report.requests["bmp"])
    #expect(request.ready == [DesktopBusTests.uri(bmp)], "\(request.errors)")
    let drawings = try #require(report.requests["drawings"])
    #expect(
      Set(drawings.ready) == Set([pdf, svg].map(DesktopBusTests.uri)), "\(drawings.errors)")
    #expect(
      setup.thumbd.metric(#"thumbd_video_frames_total{outcome="made"}"#) == 2,
      "\(setup.thumbd.metrics)")
    for (file, size) in [(pdf, (256, 171)), (svg, (256, 128))] {
      let drawn = try Thumbnailer().decodeFullResolution(.path(setup.entry(file, "large")))
      #expect(drawn.width == size.0 && drawn.height == size.1, "\(file)")
    }
    let entry = setup.entry(bmp, "large")
    let picture = try Thumbnailer().decodeFullResolution(.path(entry))
    #expect(picture.width == 256 && picture.height == 171)
    // GLib's own check.
    let info = try await Self.output(
      [
        "XDG_CACHE_HOME=" + setup.cacheHome, "GIO_USE_VFS=local", "gio", "info", "-a",
        "thumbnail::is-valid", bmp,
      ],
      in: setup.directory)
    #expect(info.contains("thumbnail::is-valid: TRUE"), "\(info)")
    let supported = try await Self.output(
      [
        "DBUS_SESSION_BUS_ADDRESS=" + setup.address, "gdbus", "call", "--session", "--dest",
        "org.freedesktop.thumbnails.Thumbnailer1", "--object-path",
        "/org/freedesktop/thumbnails/Thumbnailer1", "--method",
        "org.freedesktop.thumbnails.Thumbnailer1.GetSupported",
      ], in: setup.directory)
    #expect(supported.contains("'image/x-portable-pixmap'"), "\(supported)")
    #expect(supported.contains("'image/bmp'"), "thumbd reads BMP itself: \(supported)")
    #expect(supported.contains("'image/jpeg'"))
    #expect(supported.contains("'application/pdf'") && supported.contains("'image/svg+xml'"))
  }

  /// What `command` (run by env) printed.
  static func output(_ command: [String], in directory: String) async throws -> String {
    let file = directory + "/output-\(UInt64.random(in: 0...UInt64.max)).txt"
    _ = try await ChildProcess.runThumbd(command, standardOutput: file, binary: "/usr/bin/env")
    return (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
  }

  @Test(
    "a hostile entry's escapes fail: no secret, no connection, no giant decode, no link followed; each file gets Error and a fail entry, and the daemon stays up"
  )
  func hostileEntry() async throws {
    let bench = try await Self.start(entries: ["hostile.thumbnailer": Self.hostileEntry])
    defer { bench.stop() }
    let (setup, daemon) = (bench.setup, bench.daemon)
    let secret = setup.directory + "/secret.txt"
    let secretText = "secret-\(UInt64.random(in: 0...UInt64.max))"
    try secretText.write(toFile: secret, atomically: false, encoding: .utf8)
    chmod(secret, 0o644)
    let listener = ts_listen_tcp("127.0.0.1", 0, 16)
    defer { close(listener) }
    var paths: [String] = []
    for (name, program) in Self.hostile(secret: secret, port: ts_local_port(listener)).sorted(by: {
      $0.key < $1.key
    }) {
      let path = setup.files + "/\(name).py"
      try program.write(toFile: path, atomically: false, encoding: .utf8)
      chmod(path, 0o644)
      paths.append(path)
    }
    let started = ContinuousClock.now
    let report = try await setup.client([
      DesktopBusTests.request(
        "hostile", paths, extra: ["mime_types": paths.map { _ in "application/x-thumbd-hostile" }])
    ])
    let elapsed = started.duration(to: .now)
    let request = try #require(report.requests["hostile"])
    #expect(request.ready.isEmpty, "\(request.ready)")
    #expect(Set(request.errors.map(\.uri)) == Set(paths.map(DesktopBusTests.uri)))
    // Each is damaged (2): what the thumbnailer wrote is no picture thumbd takes.
    #expect(request.errors.allSatisfy { $0.code == 2 }, "\(request.errors)")
    for path in paths {
      #expect(!FileManager.default.fileExists(atPath: setup.entry(path)))
    }
    let fails = try FileManager.default.contentsOfDirectory(atPath: setup.cache + "/fail")
    #expect(fails.count == 1)
    // Nothing in the cache holds the secret; nothing connected.
    let enumerator = FileManager.default.enumerator(atPath: setup.cache)
    while let name = enumerator?.nextObject() as? String {
      let bytes = FileManager.default.contents(atPath: setup.cache + "/" + name) ?? Data()
      #expect(bytes.range(of: Data(secretText.utf8)) == nil, "\(name) holds the secret")
    }
    _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
    #expect(accept(listener, nil, nil) < 0, "a child connected to the host")
    #expect(daemon.metric("thumbd_desktop_jobs_total") != nil, "the daemon answers")
    // Every run is counted by how it ended.
    let runs = #"thumbd_thumbnailer_runs_total{entry="hostile.thumbnailer",outcome="#
    #expect(daemon.metric(runs + #""unusable_output"}"#) == 4, "\(daemon.metrics)")
    #expect(daemon.metric(runs + #""failed"}"#) == 2)
    #expect(elapsed < .seconds(30), "\(elapsed)")
    print("hostile entries: \(paths.count) files in \(elapsed)")
  }
}

extension InstalledThumbnailersBusTests {
  /// A slow "thumbnailer": sleeps, then writes a small PNG.
  static let slowEntry = """
    [Thumbnailer Entry]
    Exec=/usr/bin/python3 %i %o
    MimeType=application/x-thumbd-slow;
    """

  @Test(
    "Dequeue kills the sandboxed children at once: none is left within a second, and the metrics count the kills"
  )
  func dequeueKillsChildren() async throws {
    let bench = try await Self.start(
      entries: ["slow.thumbnailer": Self.slowEntry], decodeThreads: 4)
    defer { bench.stop() }
    let (setup, daemon) = (bench.setup, bench.daemon)
    let program = Self.picture(sleeping: 0.3)
    // The extension names the children: their command lines hold /thumbd/input.slowpoke.
    var paths: [String] = []
    for index in 0..<200 {
      let path = setup.files + "/clip-\(index).slowpoke"
      try program.write(toFile: path, atomically: false, encoding: .utf8)
      chmod(path, 0o644)
      paths.append(path)
    }
    let report = try await setup.client([
      DesktopBusTests.request(
        "slow", paths,
        extra: ["mime_types": paths.map { _ in "application/x-thumbd-slow" }, "dequeue_after": 10])
    ])
    let dequeued = ContinuousClock.now
    let request = try #require(report.requests["slow"])
    #expect(
      request.ready.count >= 10 && request.ready.count < 40,
      "\(request.ready.count) \(request.errors.prefix(3))")
    await eventually("no child left") {
      DelegatedFixtures.processes(holding: "/thumbd/input.slowpoke") == 0
    }
    #expect(dequeued.duration(to: .now) < .seconds(1))
    let cancelled =
      daemon.metric(
        #"thumbd_thumbnailer_runs_total{entry="slow.thumbnailer",outcome="cancelled"}"#) ?? 0
    #expect(cancelled >= 1, "\(daemon.metrics)")
    #expect(
      (daemon.metric(#"thumbd_thumbnailer_runs_total{entry="slow.thumbnailer",outcome="made"}"#)
        ?? 0)
        >= 10)
  }
}

extension InstalledThumbnailersBusTests {
  @Test(
    "an entry installed while the daemon runs is read at once (its folder is watched) and GetSupported lists its type; before it, the type is refused without a fail entry"
  )
  func reloadOnHangUp() async throws {
    let bench = try await Self.start(entries: [:], system: false)
    defer { bench.stop() }
    let (setup, daemon) = (bench.setup, bench.daemon)
    @Sendable func supported() async throws -> String {
      try await Self.output(
        [
          "DBUS_SESSION_BUS_ADDRESS=" + setup.address, "gdbus", "call", "--session", "--dest",
          "org.freedesktop.thumbnails.Thumbnailer1", "--object-path",
          "/org/freedesktop/thumbnails/Thumbnailer1", "--method",
          "org.freedesktop.thumbnails.Thumbnailer1.GetSupported",
        ], in: setup.directory)
    }
    let listed = try await supported()
    #expect(listed.contains("'image/jpeg'"), "\(listed)")
    #expect(!listed.contains("application/x-thumbd-slow"), "\(listed)")
    let program = Self.picture()
    let path = setup.files + "/late.type"
    try program.write(toFile: path, atomically: false, encoding: .utf8)
    chmod(path, 0o644)
    let ask = DesktopBusTests.request(
      "late", [path], extra: ["mime_types": ["application/x-thumbd-slow"]])
    let before = try #require(try await setup.client([ask], name: "before").requests["late"])
    #expect(before.errors.map(\.code) == [0], "\(before.errors)")
    #expect(!FileManager.default.fileExists(atPath: setup.cache + "/fail"))
    try Self.slowEntry.write(
      toFile: bench.entries + "/late.thumbnailer", atomically: false, encoding: .utf8)
    // The folder is watched: no signal needed.
    await eventually("the entries are read again") { daemon.log.contains("reloaded") }
    let after = try #require(try await setup.client([ask], name: "after").requests["late"])
    #expect(after.ready == [DesktopBusTests.uri(path)], "\(after.errors)")
    // A file manager asking again sees the new type, without a restart.
    let relisted = try await supported()
    #expect(relisted.contains("'application/x-thumbd-slow'"), "\(relisted)")
    #expect(relisted.contains("'image/jpeg'"), "\(relisted)")
    // SIGHUP reads them too.
    kill(daemon.pid, SIGHUP)
    await eventually("read again on SIGHUP") {
      daemon.log.split(separator: "\n").contains {
        $0.contains("reloaded") && $0.contains("signal")
      }
    }
  }
}

extension InstalledThumbnailersBusTests {
  /// An entry for NEF files that ignores its input and writes a red 40x30 PNG (FFmpeg's colour
  /// source), so a thumbnail it made shows.
  static let rawEntry = """
    [Thumbnailer Entry]
    TryExec=/usr/bin/ffmpeg
    Exec=/usr/bin/ffmpeg -v quiet -f lavfi -i color=c=red:s=40x30 -frames:v 1 -metadata title=%i -f image2 -c:v png -y %o
    MimeType=image/x-nikon-nef;
    """

  @Test(
    "a camera RAW is thumbd's own (its preview); one without a preview goes to the installed entry for its type"
  )
  func rawFallback() async throws {
    let bench = try await Self.start(entries: ["raw.thumbnailer": Self.rawEntry], system: false)
    defer { bench.stop() }
    let setup = bench.setup
    let withPreview = setup.files + "/with preview.nef"
    try Data(RawFixtures.nefLike(preview: (320, 240), colour: [20, 180, 60])).write(
      to: URL(fileURLWithPath: withPreview))
    // The same layout with its preview's offsets pointing nowhere: no usable preview.
    var b = RawFixtures.Builder()
    let make = b.blob(Array("NIKON\0".utf8))
    let sensor = b.directory([(262, 3, [32803]), (259, 3, [1])])
    let ifd0 = b.directory([(271, 2, [6, make]), (330, 4, [sensor])])
    let without = setup.files + "/without preview.nef"
    try Data(b.finish(ifd0: ifd0)).write(to: URL(fileURLWithPath: without))
    for path in [withPreview, without] { chmod(path, 0o644) }
    let report = try await setup.client([
      DesktopBusTests.request(
        "raw", [withPreview, without],
        extra: ["mime_types": ["image/x-nikon-nef", "image/x-nikon-nef"]])
    ])
    let request = try #require(report.requests["raw"])
    #expect(
      Set(request.ready) == Set([withPreview, without].map(DesktopBusTests.uri)),
      "\(request.errors)")
    func centre(_ path: String) throws -> [UInt8] {
      let picture = try Thumbnailer().decodeFullResolution(.path(setup.entry(path)))
      let at = (picture.height / 2 * picture.width + picture.width / 2) * picture.channels
      return Array(picture.pixels[at..<(at + 3)])
    }
    // The preview, green, made by thumbd; the entry's red, for the file without one.
    #expect(try centre(withPreview).elementsEqual([20, 180, 60]) { abs(Int($0) - Int($1)) <= 6 })
    #expect(try centre(without).elementsEqual([255, 0, 0]) { abs(Int($0) - Int($1)) <= 8 })
    let runs = #"thumbd_thumbnailer_runs_total{entry="raw.thumbnailer",outcome="made"}"#
    #expect(bench.daemon.metric(runs) == 1, "the entry ran for the file without a preview alone")
  }
}

extension InstalledThumbnailersBusTests {
  @Test(
    "500 videos queued, Dequeue after 20: thumbd's own worker makes them, and none is left within a second, its kills counted"
  )
  func dequeueVideos() async throws {
    let bench = try await Self.start(entries: [:], decodeThreads: 4)
    defer { bench.stop() }
    let (setup, daemon) = (bench.setup, bench.daemon)
    // A clip whose frame takes the worker about 0.2 s (interlaced 1080-line H.264 in MPEG-TS),
    // so the files being made when the Dequeue comes are in the worker, to be killed; one
    // copy, and every other name a hard link to it.
    let clip = setup.files + "/clip-0.mts"
    try Data(Corpus.bytes("video-valid/file-type/fixture-raw.mts")).write(
      to: URL(fileURLWithPath: clip))
    chmod(clip, 0o644)
    var paths = [clip]
    for index in 1..<500 {
      let path = setup.files + "/clip-\(index).mts"
      #expect(link(clip, path) == 0)
      paths.append(path)
    }
    let report = try await setup.client([
      DesktopBusTests.request(
        "videos", paths,
        extra: ["mime_types": paths.map { _ in "video/mp2t" }, "dequeue_after": 20])
    ])
    let dequeued = ContinuousClock.now
    let request = try #require(report.requests["videos"])
    #expect(
      request.ready.count >= 20 && request.ready.count < 100,
      "\(request.ready.count) \(request.errors.prefix(3))")
    // The worker's servers name this daemon in their command line (bubblewrap's, the
    // server's and each job's, forked from it); other suites' servers run meanwhile.
    let servers = "--serve\u{0}thumbd-\(daemon.pid)"
    await eventually("no worker left") {
      DelegatedFixtures.processes(holding: servers) == 0
    }
    #expect(dequeued.duration(to: .now) < .seconds(1))
    #expect((daemon.metric(#"thumbd_video_frames_total{outcome="made"}"#) ?? 0) >= 20)
    #expect(
      (daemon.metric(#"thumbd_video_frames_total{outcome="cancelled"}"#) ?? 0) >= 1,
      "\(daemon.metrics)")
    // No installed thumbnailer ran: videos are thumbd's own.
    #expect(!daemon.metrics.contains("thumbd_thumbnailer_runs_total{"))
    let first = try #require(request.ready.first)
    let entry = setup.cache + "/normal/" + FreedesktopCache.fileName(forURI: first)
    let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: entry)), as: UTF8.self)
    #expect(text.contains("Thumb::Movie::Length"))
  }
}
