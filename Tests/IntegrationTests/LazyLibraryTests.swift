import Foundation
import Loopback
import Testing

@testable import TestSupport

/// libheif (with its codecs) is opened on the first HEIC or AVIF, never linked; libcurl only
/// where http(s) sources are allowed; libsystemd only for `--dbus` (DesktopBusTests runs
/// that). A daemon serving files maps none of them while it sees JPEGs, and the first HEIC
/// brings libheif.
@Suite("Libraries loaded on first use", .onLane(.clients))
struct LazyLibraryTests {
  /// Whether a file whose path contains `part` is mapped in the process.
  static func mapped(_ pid: pid_t, _ part: String) -> Bool {
    // Read to the end: String(contentsOfFile:) stops a /proc file at its first 4 KiB.
    guard let file = FileHandle(forReadingAtPath: "/proc/\(pid)/maps") else { return false }
    defer { try? file.close() }
    let maps = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
    return maps.split(separator: "\n").contains { $0.contains(part) }
  }

  static func target(_ url: String) -> String {
    "/v1/thumbnail?url=\(url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&w=64&h=64"
  }

  @Test(
    "a daemon serving files maps no libheif, libcurl or libsystemd until a HEIC arrives, which brings libheif alone"
  )
  func loadedOnFirstUse() async throws {
    let root = TestDaemon.makeDirectory() + "/pictures"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    for (name, source) in [
      ("photo.jpg", "photo/coil/normal.jpg"),
      ("photo.heic", "heif-valid/kimageformats/Format_Grayscale8.heic"),
    ] {
      try FileManager.default.copyItem(atPath: Corpus.path(source), toPath: root + "/" + name)
    }
    let daemon = try await TestDaemon.start([
      "--file-root", root, "--allow-scheme", "file", "--cache-dir", "",
    ])
    defer { daemon.stop() }
    #expect(SocketClient.get(daemon.socket, Self.target("file://\(root)/photo.jpg")).status == 200)
    // Nor the codec libraries libheif brought with it when it was linked.
    let codecs = ["libheif", "libx265", "libde265", "libaom", "libdav1d"]
    for library in codecs + ["libcurl", "libsystemd", "libgcrypt"] {
      #expect(!Self.mapped(daemon.pid, library), "\(library) is mapped before it was needed")
    }
    #expect(SocketClient.get(daemon.socket, Self.target("file://\(root)/photo.heic")).status == 200)
    #expect(Self.mapped(daemon.pid, "libheif.so"))
    #expect(!Self.mapped(daemon.pid, "libcurl"))
    #expect(!Self.mapped(daemon.pid, "libsystemd"))
  }
}
