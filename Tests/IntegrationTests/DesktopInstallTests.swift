import Foundation
import Testing

@testable import TestSupport

/// `scripts/desktop-install` (issue 53): one command installs thumbd as the desktop's
/// thumbnailer and one removes it, for one account or for all, here into a staging root.
@Suite("Desktop install command")
struct DesktopInstallTests {
  static func install(_ arguments: [String], home: String, destdir: String) async throws
    -> ChildProcess.Outcome
  {
    try await ChildProcess.runThumbd(
      ["HOME=" + home, "DESTDIR=" + destdir, Repository.root + "/scripts/desktop-install"]
        + arguments, binary: "/usr/bin/env")
  }

  static func files(under root: String) -> Set<String> {
    Set(
      (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []).filter {
        var directory: ObjCBool = false
        return FileManager.default.fileExists(atPath: root + "/" + $0, isDirectory: &directory)
          && !directory.boolValue
      })
  }

  @Test(
    "for one account and for all: the static binary, activation files and unit naming it, the entry only system-wide; uninstalling leaves nothing"
  )
  func installAndRemove() async throws {
    #expect(try await ChildProcess.installedProblem() == nil)
    let root = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let stage = root + "/stage"
    let home = "/home/someone"
    let account = try await Self.install(["--no-build"], home: home, destdir: stage)
    #expect(account.status == 0, "\(account.standardError)")
    let services = ".local/share/dbus-1/services/org.freedesktop.thumbnails."
    #expect(
      Self.files(under: stage)
        == [
          "home/someone/.local/bin/thumbd", "home/someone/.local/bin/thumbd-frame",
          "home/someone/\(services)Thumbnailer1.service",
          "home/someone/\(services)Cache1.service",
          "home/someone/.config/systemd/user/thumbd-desktop.service",
        ])
    for file in ["\(services)Thumbnailer1.service", ".config/systemd/user/thumbd-desktop.service"] {
      let text = try String(contentsOfFile: stage + home + "/" + file, encoding: .utf8)
      #expect(text.contains("Exec") && text.contains(home + "/.local/bin/thumbd serve"), "\(file)")
      #expect(!text.contains("/usr/local/bin"), "\(file)")
    }
    #expect(
      FileManager.default.contentsEqual(
        atPath: stage + home + "/.local/bin/thumbd", andPath: ChildProcess.installedThumbd))
    // The video worker beside it, as thumbd looks for it.
    #expect(
      FileManager.default.contentsEqual(
        atPath: stage + home + "/.local/bin/thumbd-frame",
        andPath: ChildProcess.installedThumbd + "-frame"))
    let removed = try await Self.install(["--uninstall"], home: home, destdir: stage)
    #expect(removed.status == 0, "\(removed.standardError)")
    #expect(Self.files(under: stage).isEmpty)

    let system = try await Self.install(["--system", "--no-build"], home: home, destdir: stage)
    #expect(system.status == 0, "\(system.standardError)")
    #expect(
      Self.files(under: stage)
        == [
          "usr/local/bin/thumbd", "usr/local/bin/thumbd-frame",
          "usr/local/share/thumbnailers/thumbd.thumbnailer",
          "usr/local/share/dbus-1/services/org.freedesktop.thumbnails.Thumbnailer1.service",
          "usr/local/share/dbus-1/services/org.freedesktop.thumbnails.Cache1.service",
          "etc/systemd/user/thumbd-desktop.service",
        ])
    let removedSystem = try await Self.install(
      ["--system", "--uninstall"], home: home, destdir: stage)
    #expect(removedSystem.status == 0)
    #expect(Self.files(under: stage).isEmpty)
    let wrong = try await Self.install(["--sytem"], home: home, destdir: stage)
    #expect(wrong.status == 2 && wrong.standardError.contains("unknown option"))
  }
}
