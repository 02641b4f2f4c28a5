import Foundation
import Testing

@testable import Loopback
@testable import TestSupport

/// The shipped systemd unit's system call filter, as read from Config/thumbd.service and
/// applied the way systemd applies it (scripts/run-under-unit-filter: groups expanded by
/// `systemd-analyze syscall-filter`, libseccomp): `thumbd serve` must start, answer and make
/// thumbnails of every decoder's format under it. The unit denied @resources, and libnuma (a
/// codec's dependency, loaded at start) calls set_mempolicy, so the daemon died with SIGSYS
/// before it answered anything.
@Suite("systemd unit filter", .serialized, .onLane(.clients))
struct UnitFilterTests {
  @Test("thumbd serve runs under the unit's seccomp filter and makes thumbnails of every format")
  func servesUnderTheUnitFilter() async throws {
    let unit = Repository.root + "/Config/thumbd.service"
    let runner = Repository.root + "/scripts/run-under-unit-filter"
    // The filter itself must stop what it names, or the test proves nothing.
    let probe = try await ChildProcess.runThumbd(["--help"])
    #expect(probe.status == 0)
    let root = TestDaemon.makeDirectory()
    let daemon = try await TestDaemon.start(
      ["--file-root", Corpus.root], directory: root,
      wrapper: ["/usr/bin/python3", runner, unit, "--"])
    let samples = [
      "photo/coil/normal.jpg", "heif-valid/metadata-extractor/IMG_1034.heic",
      "heif-valid/libavif/white_1x1.avif", "webp-valid/libwebp-test-data/lossless1.webp",
      "gif-valid/gdk-pixbuf/test-animation.gif",
    ].filter { FileManager.default.fileExists(atPath: Corpus.path($0)) }
    #expect(samples.count >= 4)
    let socket = daemon.socket
    // Blocking socket calls, off the cooperative pool.
    let statuses = try await offPool {
      samples.flatMap { sample in
        let url = ("file://" + Corpus.path(sample)).addingPercentEncoding(
          withAllowedCharacters: .alphanumerics)!
        return ["jpeg", "png", "webp", "avif"].map { format in
          (
            sample, format,
            SocketClient.get(socket, "/v1/thumbnail?url=\(url)&w=48&h=48&format=\(format)").status
          )
        }
      }
    }
    for (sample, format, status) in statuses {
      #expect(status == 200, "\(sample) as \(format): \(status)")
    }
    #expect(kill(daemon.pid, 0) == 0, "the daemon died under the filter")
    #expect(daemon.stop() == 0, "\(daemon.log.suffix(400))")
  }

  @Test("the runner applies the filter: a call the unit leaves out is refused")
  func runnerRefuses() async throws {
    // A unit allowing only @default and @basic-io cannot start a Swift program's threads.
    let directory = TestDaemon.makeDirectory()
    let unit = directory + "/narrow.service"
    try "[Service]\nSystemCallFilter=@basic-io\n".write(
      toFile: unit, atomically: true, encoding: .utf8)
    let runner = Repository.root + "/scripts/run-under-unit-filter"
    let pid = try ChildProcess.spawn(
      ["/usr/bin/python3", runner, unit, "--", ChildProcess.thumbd, "--help"],
      standardError: directory + "/err")
    let status = ChildProcess.wait(pid)
    #expect(status != 0, "a program that makes calls the unit leaves out ran to the end")
  }
}
