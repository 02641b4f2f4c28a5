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

  @Test(
    "a source URL and flags make the path: options in imgproxy's names, the source plain and percent-encoded or Base64, the prefix outside what is signed"
  )
  func fromURL() async throws {
    let keys = ["--key", "736563726574", "--salt", "68656c6c6f"]
    let source = "http://example.com/images/curiosity.jpg"
    let base64 = try await sign(
      [source, "-w", "300", "-h", "400", "--fit", "cover", "--option", "g:ce", "--base64"] + keys)
    let expectedPath =
      "/w:300/h:400/rt:fill/g:ce/aHR0cDovL2V4YW1wbGUuY29tL2ltYWdlcy9jdXJpb3NpdHkuanBn"
    let samePath = try await sign([expectedPath] + keys)
    #expect(base64.0 == 0 && base64.1 == samePath.1, "the URL form signs what the PATH form does")
    #expect(base64.1.hasSuffix(expectedPath + "\n"))
    let plain = try await sign(
      [
        "http://a/b c@d.jpg?x=1", "--format", "webp", "--scale", "2", "--quality", "70",
        "--preset", "card", "--prefix", "/img",
      ] + keys)
    #expect(plain.0 == 0)
    #expect(plain.1.hasPrefix("/img/"))
    #expect(plain.1.hasSuffix("/f:webp/dpr:2/q:70/pr:card/plain/http://a/b%20c%40d.jpg%3Fx%3D1\n"))
    let unprefixed = try await sign(
      ["/f:webp/dpr:2/q:70/pr:card/plain/http://a/b%20c%40d.jpg%3Fx%3D1"] + keys)
    #expect("/img" + unprefixed.1 == plain.1, "the prefix is not part of what is signed")
  }

  @Test(
    "a key without its salt, no key at all, image flags with a PATH, or a bad flag value is a usage error"
  )
  func refused() async throws {
    for arguments in [
      [Self.path, "--key", "736563726574"], [Self.path],
      [Self.path, "-w", "3", "--key", "00", "--salt", "00"],
      ["http://a/b.jpg", "--fit", "stretch", "--key", "00", "--salt", "00"],
      ["http://a/b.jpg", "--option", "a/b", "--key", "00", "--salt", "00"],
    ] {
      let (status, output) = try await sign(arguments)
      #expect(status == 2 && output.isEmpty, "\(arguments)")
    }
    // What is wrong, and where help is: not the whole help text (issue 52).
    let noKey = try await ChildProcess.runThumbd(["sign", Self.path])
    let lines = noKey.standardError.split(separator: "\n")
    #expect(lines.count == 2, "\(noKey.standardError)")
    #expect(lines.first?.contains("no key") == true && lines.last?.contains("--help") == true)
  }

  @Test("thumbd --version names the newest version CHANGELOG.md released")
  func version() async throws {
    let changelog = try String(contentsOfFile: Repository.root + "/CHANGELOG.md", encoding: .utf8)
    let released = try #require(
      changelog.split(separator: "\n").first {
        $0.hasPrefix("## ") && $0.dropFirst(3).first?.isNumber == true
      }?.dropFirst(3))
    let output = TestDaemon.makeDirectory() + "/version.txt"
    let run = try await ChildProcess.runThumbd(["--version"], standardOutput: output)
    #expect(run.status == 0)
    let printed = try String(contentsOfFile: output, encoding: .utf8)
    #expect(printed.hasPrefix("thumbd \(released)\n"), "\(printed)")
  }
}
