import Foundation
import ImagePipeline
import Testing

@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Config/thumbd.thumbnailer as gnome-desktop runs it: the Exec line expanded, in a bubblewrap
/// sandbox where only /usr (and the binary) is visible, with no network and no home.
@Suite("GNOME and KDE thumbnailer entry")
struct ThumbnailerEntryTests {
  static let entryPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Config/thumbd.thumbnailer").path

  /// The keys of the `[Thumbnailer Entry]` group.
  static func entry() throws -> [String: String] {
    let text = try String(contentsOfFile: entryPath, encoding: .utf8)
    var keys: [String: String] = [:]
    var inGroup = false
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
      if line.hasPrefix("[") {
        inGroup = line == "[Thumbnailer Entry]"
      } else if inGroup, let equals = line.firstIndex(of: "=") {
        keys[String(line[..<equals])] = String(line[line.index(after: equals)...])
      }
    }
    return keys
  }

  /// The Exec line with gnome-desktop's substitutions: %s size, %i input path, %u its URI,
  /// %o output path, %% a percent sign.
  static func expand(_ exec: String, size: Int, input: String, output: String) -> [String] {
    exec.split(separator: " ").map { word in
      var out = ""
      var characters = word.makeIterator()
      while let character = characters.next() {
        guard character == "%", let code = characters.next() else {
          out.append(character)
          continue
        }
        switch code {
        case "s": out += String(size)
        case "i": out += input
        case "u": out += "file://" + input
        case "o": out += output
        default: out.append(code)
        }
      }
      return out
    }
  }

  @Test("the entry names every format thumbd reads")
  func mimeTypes() throws {
    let keys = try Self.entry()
    let types = Set((keys["MimeType"] ?? "").split(separator: ";").map(String.init))
    #expect(types == Set(SourceFormat.desktopMediaTypes))
    #expect(keys["TryExec"] == "thumbd")
  }

  @Test(
    "each format becomes a PNG within the size, in the sandbox gnome-desktop uses",
    arguments: [
      "photo/coil/large.jpg", "png-valid/image-png/rgba.png",
      "heif-valid/nuke/img_751.heic", "webp-valid/libwebp-test-data/bryce.webp",
    ])
  func sandboxed(_ relative: String) async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let exec = try #require(try Self.entry()["Exec"])
    let name = URL(fileURLWithPath: relative).lastPathComponent
    let command = Self.expand(
      exec, size: 256, input: "/run/input/" + name, output: "/run/output/thumbnail.png")
    // The Swift runtime's folder: an installed thumbd carries it (--static-swift-stdlib).
    let runtime = "/opt/swift/usr/lib/swift/linux"
    var sandbox = [
      "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64",
      "/lib64", "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
      "--unshare-all", "--die-with-parent", "--clearenv", "--setenv", "PATH", "/app:/usr/bin",
      "--tmpfs", "/run", "--ro-bind", ChildProcess.thumbd, "/app/thumbd",
      "--ro-bind", Corpus.path(relative), "/run/input/" + name,
      "--bind", directory, "/run/output",
    ]
    if FileManager.default.fileExists(atPath: runtime) {
      sandbox += ["--ro-bind", runtime, runtime]
    }
    let run = try await ChildProcess.runThumbd(sandbox + command, binary: "/usr/bin/bwrap")
    #expect(run.status == 0, "\(command): \(run.standardError)")
    let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/thumbnail.png")))
    #expect(ImageFormat.sniff(bytes) == .png)
    let thumbnail = try Thumbnailer().thumbnail(
      .bytes(bytes), spec: ValidSpec(ThumbnailSpec(width: 512, height: 512)))
    #expect(max(thumbnail.sourceWidth, thumbnail.sourceHeight) <= 256)
    #expect(max(thumbnail.sourceWidth, thumbnail.sourceHeight) >= 100)
  }

  /// Whether GNOME's factory can run here: root (to place the binary under /usr, the only
  /// tree its sandbox shows) and its Python bindings; the test then needs thumbd's installed
  /// form (`ChildProcess.installedThumbd`), which scripts/test builds, and names the command
  /// when it is missing. CI sets THUMBD_REQUIRE_DESKTOP=1: then a missing piece fails the test.
  static var gnomeFactoryAvailable: Bool {
    getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/bin/python3")
      && FileManager.default.fileExists(
        atPath: "/usr/lib/x86_64-linux-gnu/girepository-1.0/GnomeDesktop-3.0.typelib")
  }
  static var desktopRequired: Bool {
    ProcessInfo.processInfo.environment["THUMBD_REQUIRE_DESKTOP"] == "1"
  }

  @Test(
    "GNOME's own thumbnail factory runs the entry in its sandbox: HEIC and AVIF, which only thumbd claims, get thumbnails",
    .enabled(
      if: gnomeFactoryAvailable || desktopRequired,
      "needs root, python3-gi and gir1.2-gnomedesktop-3.0"))
  func gnomeFactory() async throws {
    // The installed form, chosen by name, never by age: a release build scripts/run left is
    // the same form (issue 52: a dynamically linked one was picked and failed here).
    let binary = ChildProcess.installedThumbd
    if let problem = try await ChildProcess.installedProblem() {
      Issue.record(Comment(rawValue: problem))
      return
    }
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    // Installed where the sandbox sees it, for this test only.
    let installed = "/usr/local/lib/thumbd-test-\(getpid())-\(UUID().uuidString.prefix(6))"
    try FileManager.default.createDirectory(atPath: installed, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: installed) }
    try FileManager.default.copyItem(atPath: binary, toPath: installed + "/thumbd")
    let data = directory + "/data"
    try FileManager.default.createDirectory(
      atPath: data + "/thumbnailers", withIntermediateDirectories: true)
    let entry = try String(contentsOfFile: Self.entryPath, encoding: .utf8)
      .replacingOccurrences(of: "TryExec=thumbd", with: "TryExec=\(installed)/thumbd")
      .replacingOccurrences(of: "Exec=thumbd ", with: "Exec=\(installed)/thumbd ")
    try entry.write(
      toFile: data + "/thumbnailers/thumbd.thumbnailer", atomically: true, encoding: .utf8)
    let pictures = directory + "/pictures"
    try FileManager.default.createDirectory(atPath: pictures, withIntermediateDirectories: true)
    let files = [
      ("heif-valid/nuke/img_751.heic", "image/heic"),
      ("heif-valid/av1-avif/Monochrome.avif", "image/avif"),
    ]
    for (relative, _) in files {
      try FileManager.default.copyItem(
        atPath: Corpus.path(relative),
        toPath: pictures + "/" + URL(fileURLWithPath: relative).lastPathComponent)
    }
    // The factory, called as Nautilus calls it; one line per file: name, then the size or
    // the error.
    let script = directory + "/factory.py"
    try """
    import gi, os, sys
    gi.require_version('GnomeDesktop', '3.0')
    from gi.repository import GnomeDesktop, Gio
    factory = GnomeDesktop.DesktopThumbnailFactory.new(GnomeDesktop.DesktopThumbnailSize.LARGE)
    for path, mime in zip(sys.argv[1::2], sys.argv[2::2]):
        uri = Gio.File.new_for_path(path).get_uri()
        mtime = int(os.stat(path).st_mtime)
        if not factory.can_thumbnail(uri, mime, mtime):
            print(os.path.basename(path), 'cannot'); continue
        try:
            picture = factory.generate_thumbnail(uri, mime, None)
            factory.save_thumbnail(picture, uri, mtime, None)
            print(os.path.basename(path), picture.get_width(), picture.get_height())
        except Exception as error:
            print(os.path.basename(path), 'error', error)
    """.write(toFile: script, atomically: true, encoding: .utf8)
    let arguments = files.flatMap { relative, mime in
      [pictures + "/" + URL(fileURLWithPath: relative).lastPathComponent, mime]
    }
    // The system's data folders as the factory sees them: the MIME database and GSettings
    // schemas, but none of the system's own thumbnailer entries (heif-thumbnailer claims HEIC
    // and AVIF too), so a thumbnail can only come from the entry under test.
    let system = directory + "/system share"
    try FileManager.default.createDirectory(atPath: system, withIntermediateDirectories: true)
    for folder in ["mime", "glib-2.0"] {
      try FileManager.default.createSymbolicLink(
        atPath: system + "/" + folder, withDestinationPath: "/usr/share/" + folder)
    }
    func factory(dataHome: String) async throws -> [String: String] {
      let output = directory + "/factory-\(UUID().uuidString.prefix(6)).txt"
      let run = try await ChildProcess.runThumbd(
        [
          "XDG_DATA_HOME=" + dataHome, "XDG_DATA_DIRS=" + system,
          "XDG_CACHE_HOME=" + directory + "/cache",
          "HOME=" + directory, "/usr/bin/python3", script,
        ] + arguments, standardOutput: output, binary: "/usr/bin/env")
      #expect(run.status == 0, "\(run.standardError)")
      var answers: [String: String] = [:]
      for line in try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n") {
        let parts = line.split(separator: " ", maxSplits: 1)
        answers[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
      }
      return answers
    }
    // Without thumbd's entry nothing the factory sees thumbnails these types ...
    let without = try await factory(dataHome: directory + "/empty")
    // ... with it, each gets a large thumbnail (longest side 256) from thumbd in the sandbox.
    let with = try await factory(dataHome: data)
    for (relative, _) in files {
      let name = URL(fileURLWithPath: relative).lastPathComponent
      #expect(without[name] == "cannot", "\(name): \(without[name] ?? "nothing")")
      let size = (with[name] ?? "").split(separator: " ").compactMap { Int($0) }
      #expect(
        size.count == 2 && size.max() == 256 && size.min()! > 0,
        "\(name): \(with[name] ?? "nothing")")
    }
  }
}
