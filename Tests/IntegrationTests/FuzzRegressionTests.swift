import Foundation
import FuzzTargets
import Testing

@testable import TestSupport

/// Every input kept in `Tests/Fuzz/<target>/` (hand-made seeds and every finding of
/// scripts/fuzz) still keeps its target's invariants. Replayed through the `thumbfuzz run`
/// binary, so an input that traps is reported here as a failure, not a crash of the tests.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
  static let inputs = Repository.root + "/Tests/Fuzz"

  @Test("each target's kept inputs replay cleanly", arguments: FuzzTarget.all.map(\.name))
  func replay(target: String) async throws {
    let directory = Self.inputs + "/" + target
    let thumbfuzz = URL(fileURLWithPath: ChildProcess.thumbd).deletingLastPathComponent()
      .appendingPathComponent("thumbfuzz").path
    let log = TestDaemon.makeDirectory() + "/replay.log"
    let pid = try ChildProcess.spawn(
      [thumbfuzz, "run", target, directory], standardError: log,
      environment: ["SWIFT_BACKTRACE": "enable=no"])
    let status = await ChildProcess.exit(of: pid)
    let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
    #expect(status == 0, "\(target): \(output)")
  }

  @Test("every target has a directory of kept inputs, and every kept finding a target")
  func layout() throws {
    let names = Set(FuzzTarget.all.map(\.name))
    let directories = Set(try FileManager.default.contentsOfDirectory(atPath: Self.inputs))
      .filter { !$0.hasSuffix(".md") }
    #expect(directories == names)
  }
}
