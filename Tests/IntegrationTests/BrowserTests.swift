import Foundation
import Testing

@testable import TestSupport

/// A real browser through the shipped nginx config: headless Chromium loads a page of signed
/// `srcset` URLs at DPR 2 (scripts/browser-check). scripts/bootstrap installs chromium and
/// nginx, so this runs in CI.
@Suite("Browser")
struct BrowserTests {
  static var available: Bool {
    ["/usr/bin/chromium", "/usr/sbin/nginx"].allSatisfy {
      FileManager.default.isExecutableFile(atPath: $0)
    }
  }

  @Test(
    "Chromium at DPR 2 gets each signed srcset image at its size, in WebP, through nginx's cache, which keeps variants apart by Vary",
    .enabled(if: available, "needs chromium and nginx (scripts/bootstrap installs them)"))
  func srcsetThroughNginx() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let output = directory + "/report.json"
    let outcome = try await ChildProcess.runThumbd(
      [
        "/usr/bin/python3", Repository.root + "/scripts/browser-check", "--thumbd",
        ChildProcess.thumbd, "--image", Corpus.path("photo/coil/normal.jpg"), "--screenshot",
        directory + "/page.png",
      ], standardOutput: output, binary: "/usr/bin/env")
    let report = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
    #expect(outcome.status == 0, "\(report)\n\(outcome.standardError)")
    #expect(report.contains("\"failures\": []"))
    #expect(FileManager.default.fileExists(atPath: directory + "/page.png"))
  }
}
