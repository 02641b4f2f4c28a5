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
    for format in SourceFormat.allCases {
      #expect(types.contains(format.mediaType), "\(format.mediaType) missing")
    }
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
      of: bytes, spec: ThumbnailSpec(width: 512, height: 512))
    #expect(max(thumbnail.sourceWidth, thumbnail.sourceHeight) <= 256)
    #expect(max(thumbnail.sourceWidth, thumbnail.sourceHeight) >= 100)
  }
}
