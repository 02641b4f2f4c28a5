import Foundation
import Testing

@testable import TestSupport

/// `thumbd sign` prints what imgproxy's client libraries would for the same key, salt and path.
@Suite("thumbd sign")
struct SignCommandTests {
  static let path =
    "/rs:fill:300:400:0/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png"

  func sign(_ arguments: [String], environment: [String] = []) async throws -> (Int32, String) {
    let output = TestDaemon.makeDirectory() + "/out.txt"
    let outcome = try await ChildProcess.runThumbd(
      environment + [ChildProcess.thumbd, "sign"] + arguments, standardOutput: output,
      binary: "/usr/bin/env")
    return (outcome.status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
  }

  @Test("imgproxy's documented example, from flags and from the environment")
  func documented() async throws {
    let expected = "/oKfUtW34Dvo2BGQehJFR4Nr0_rIjOtdtzJ3QFsUcXH8" + Self.path + "\n"
    let flags = try await sign([Self.path, "--key", "736563726574", "--salt", "68656c6c6f"])
    #expect(flags.0 == 0 && flags.1 == expected)
    let environment = try await sign(
      [Self.path],
      environment: ["THUMBD_SIGNING_KEYS=736563726574,00ff", "THUMBD_SIGNING_SALTS=68656c6c6f,00"])
    #expect(environment.0 == 0 && environment.1 == expected, "the first pair signs")
    let truncated = try await sign(
      [Self.path, "--key", "736563726574", "--salt", "68656c6c6f", "--signature-size", "8"])
    #expect(truncated.1 == "/oKfUtW34Dvo" + Self.path + "\n")
  }

  @Test("a key without its salt, a path without '/', or no key at all is a usage error")
  func refused() async throws {
    for arguments in [
      [Self.path, "--key", "736563726574"], ["rs:fit:1:1/plain/x", "--key", "00", "--salt", "00"],
      [Self.path],
    ] {
      let (status, output) = try await sign(arguments)
      #expect(status == 2 && output.isEmpty, "\(arguments)")
    }
  }
}
