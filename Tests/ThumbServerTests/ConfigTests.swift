import Foundation
import Testing

@testable import TestSupport
@testable import ThumbServer

/// Settings: the shipped file, precedence, parsing, and errors that name the key.
@Suite("Config")
struct ConfigTests {
  static let repository = Repository.root

  private func load(
    _ arguments: [String], _ environment: [String: String] = [:]
  ) throws(ConfigError) -> DaemonConfig {
    guard
      case .serve(let config, _) = try ConfigLoader.load(
        arguments: arguments, environment: environment)
    else { fatalError("help was not asked for") }
    return config
  }

  @Test("Config/thumbd.json holds exactly the embedded defaults, every key, each documented")
  func shippedFileIsTheDefaults() throws {
    let path = Self.repository + "/Config/thumbd.json"
    let bytes = try #require(FileManager.default.contents(atPath: path))
    var fromFile = DaemonConfig()
    // Start from values that differ from every default, so a key missing from the file shows.
    fromFile.memoryLimit = 1
    fromFile.socket = "x"
    try ConfigLoader.apply(file: [UInt8](bytes), origin: path, to: &fromFile)
    #expect(fromFile == DaemonConfig())
    let object = try #require(
      try JSONSerialization.jsonObject(with: bytes) as? [String: Any])
    let keys = Set(object.keys.filter { !$0.hasPrefix("_") })
    #expect(keys == Set(ConfigOption.all.map(\.key)))
    let docs = try String(contentsOfFile: Self.repository + "/docs/CONFIG.md", encoding: .utf8)
    for option in ConfigOption.all {
      #expect(docs.contains("`\(option.key)`"), "docs/CONFIG.md lacks \(option.key)")
      #expect(docs.contains(option.flag), "docs/CONFIG.md lacks \(option.flag)")
      #expect(
        docs.contains(option.environmentName), "docs/CONFIG.md lacks \(option.environmentName)")
    }
  }

  @Test("docs/CONFIG.md's table and --help come from one text: every row's default and meaning")
  func docsTableIsTheHelpText() throws {
    let docs = try String(contentsOfFile: Self.repository + "/docs/CONFIG.md", encoding: .utf8)
    var rows: [String: (String, String)] = [:]
    for line in docs.split(separator: "\n") where line.hasPrefix("| `") {
      let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
        $0.trimmingCharacters(in: .whitespaces)
      }
      guard cells.count >= 7, cells[3].hasPrefix("`THUMBD_") else { continue }
      rows[String(cells[1].dropFirst().dropLast())] = (
        cells[4], cells[5...].dropLast().joined(separator: "|")
      )
    }
    #expect(Set(rows.keys) == Set(ConfigOption.all.map(\.key)))
    for option in ConfigOption.all {
      let row = try #require(rows[option.key], "docs/CONFIG.md has no row for \(option.key)")
      #expect(row.0 == option.defaultValue, "\(option.key): docs say \(row.0)")
      #expect(row.1 == option.meaning, "\(option.key): the docs' meaning differs from --help's")
      #expect(!option.meaning.isEmpty)
    }
  }

  @Test("an unknown flag gets the nearest real ones")
  func didYouMean() {
    #expect(ConfigOption.near("--memory-limt").first == "--memory-limit")
    #expect(ConfigOption.near("--listn").first == "--listen")
    #expect(ConfigOption.near("--zzzzzzzzzz").isEmpty)
    #expect(throws: ConfigError.self) {
      _ = try ConfigLoader.load(arguments: ["--memory-limt", "1MiB"], environment: [:])
    }
    do {
      _ = try ConfigLoader.load(arguments: ["--memry-budget", "1MiB"], environment: [:])
    } catch {
      #expect("\(error)".contains("did you mean --memory-budget"), "\(error)")
    }
  }

  @Test("flags beat environment variables, which beat the file, which beats the defaults")
  func precedence() throws {
    let file = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-config-\(UUID().uuidString).json").path
    try Data(#"{"memory_limit": "8MiB", "default_quality": 70, "log_format": "json"}"#.utf8)
      .write(to: URL(fileURLWithPath: file))
    defer { try? FileManager.default.removeItem(atPath: file) }
    let config = try load(
      ["--config", file, "--memory-limit", "2m"],
      ["THUMBD_MEMORY_LIMIT": "4MiB", "THUMBD_DEFAULT_QUALITY": "75"])
    #expect(config.memoryLimit == 2 << 20)
    #expect(config.defaultQuality == 75)
    #expect(config.logFormat == .json)
    #expect(config.diskLimit == 1 << 30)
    let viaEnvironment = try load([], ["THUMBD_CONFIG": file])
    #expect(viaEnvironment.memoryLimit == 8 << 20)
  }

  @Test("every list option's flag, repeated, adds to the list (each entry one its rule takes)")
  func everyListFlagAppends() throws {
    let entries: [String: [String]] = [
      "allowed_schemes": ["http", "file"], "allowed_networks": ["10.0.0.0/8", "::1/128"],
      "trusted_proxies": ["10.0.0.1", "192.168.0.0/16"],
      "signing_keys": ["00ff", "ab"], "signing_salts": ["01", "02"],
      "presets": ["a=w:1", "b=h:2"], "watermarks": ["logo=/one.png", "seal=/two.png"],
    ]
    for option in ConfigOption.all {
      guard let field = option.listField else { continue }
      let values = entries[option.key] ?? ["/one", "/two"]
      let config = try load(values.flatMap { [option.flag, $0] })
      #expect(config[keyPath: field] == values, "\(option.flag) repeated")
    }
  }

  @Test("values: byte sizes, switches, repeated list flags, comma lists, path expansion")
  func values() throws {
    let config = try load(
      [
        "--disk-limit", "3G", "--allow-private", "--file-root", "/a", "--file-root=/b",
        "--listen", "127.0.0.1:8080", "--socket-mode", "600", "--cache-dir", "${HOME_X:-/c}/t",
      ],
      ["THUMBD_ALLOWED_HOSTS": "a.example, .b.example", "THUMBD_DRAIN_TIMEOUT": "2.5"])
    #expect(config.diskLimit == 3 << 30)
    #expect(config.allowPrivate)
    #expect(config.fileRoots == ["/a", "/b"])
    #expect(config.allowedHosts == ["a.example", ".b.example"])
    #expect(config.socketMode == 0o600)
    #expect(config.cacheDir == "/c/t")
    #expect(config.drainTimeout == 2.5)
    #expect(ListenAddress(config.listen) == ListenAddress("127.0.0.1:8080"))
    // IPv6 in brackets; no zone ids, no bare IPv6, no names.
    #expect(ListenAddress("[::1]:0")?.host == "::1")
    #expect(ListenAddress("[::1]:8089")?.isLoopback == true)
    #expect(ListenAddress("[2001:db8::1]:80")?.isLoopback == false)
    for bad in ["::1:80", "[::1%lo]:80", "[localhost]:80", "[1.2.3.4]:80", "[::1]"] {
      #expect(ListenAddress(bad) == nil, "\(bad)")
    }
    #expect(try load(["--allow-private=false"]).allowPrivate == false)
    let expanded = ConfigLoader.expand(
      "${A:-${B:-/fallback}}/x$C", environment: ["B": "/b", "C": "y"])
    #expect(expanded == "/b/xy")
    #expect(try load([], ["XDG_RUNTIME_DIR": "/run/user/7"]).socket == "/run/user/7/thumbd.sock")
  }

  @Test("every bad value is refused with the key and where it came from")
  func errorsNameTheKey() throws {
    let cases: [([String], [String: String], String)] = [
      (["--memory-limit", "lots"], [:], "memory_limit"),
      (["--socket-mode", "999"], [:], "socket_mode"),
      (["--listen", "localhost"], [:], "listen"),
      (["--default-format", "bmp"], [:], "default_format"),
      (["--default-quality", "0"], [:], "default_quality"),
      (["--allow-scheme", "ftp"], [:], "allowed_schemes"),
      ([], ["THUMBD_MAX_PIXELS": "-1"], "max_pixels"),
      ([], ["THUMBD_LOG_LEVEL": "loud"], "log_level"),
      ([], ["THUMBD_CONNECT_TIMEOUT": "soon"], "connect_timeout"),
      (["--decode-threads"], [:], "decode_threads"),
      // Converted to milliseconds or nanoseconds, 1e300 s would trap: a year at most.
      (["--header-timeout", "1e300"], [:], "header_timeout"),
      ([], ["THUMBD_REQUEST_TIMEOUT": "31536001"], "request_timeout"),
    ]
    for (arguments, environment, key) in cases {
      #expect(throws: ConfigError.self) { try load(arguments, environment) }
      do {
        _ = try load(arguments, environment)
      } catch {
        #expect(error.key == key, "\(arguments) \(environment): \(error)")
        #expect(error.description.contains(key))
      }
    }
    var config = DaemonConfig()
    let unknown = #expect(throws: ConfigError.self) {
      try ConfigLoader.apply(file: Array(#"{"memory_limt": 5}"#.utf8), origin: "f", to: &config)
    }
    #expect(unknown?.key == "memory_limt")
    let typed = #expect(throws: ConfigError.self) {
      try ConfigLoader.apply(
        file: Array(#"{"allow_private": "maybe"}"#.utf8), origin: "f", to: &config)
    }
    #expect(typed?.key == "allow_private")
    #expect(throws: ConfigError.self) {
      try ConfigLoader.apply(file: Array("[1]".utf8), origin: "f", to: &config)
    }
    #expect(throws: ConfigError.self) { try load(["--no-such-flag"]) }
  }

  /// Found by fuzzing: the config file was looked for in every argument, so a flag's value
  /// that looked like `--config=...` was read as a config path.
  @Test("the command line is read once, left to right: a flag's value is never a flag")
  func flagValuesAreValues() throws {
    let config = try load(["--socket", "--config=/nonexistent", "--cache-dir", "-h"])
    #expect(config.socket == "--config=/nonexistent")
    #expect(config.cacheDir == "-h")
    guard case .help = try ConfigLoader.load(arguments: ["--bogus", "--help"], environment: [:])
    else {
      Issue.record("--help after a bad flag did not ask for help")
      return
    }
  }

  @Test("the binary exits 2 and names the key for a bad config file, variable or flag")
  func binaryRefusesBadConfig() async throws {
    let file = FileManager.default.temporaryDirectory
      .appendingPathComponent("thumbd-bad-\(UUID().uuidString).json").path
    try Data(#"{"disk_limit": "huge"}"#.utf8).write(to: URL(fileURLWithPath: file))
    defer { try? FileManager.default.removeItem(atPath: file) }
    let bad = try await ChildProcess.runThumbd(["serve", "--config", file])
    #expect(bad.status == 2)
    #expect(bad.standardError.contains("disk_limit") && bad.standardError.contains(file))
    let flag = try await ChildProcess.runThumbd(["serve", "--max-redirects", "101"])
    #expect(flag.status == 2 && flag.standardError.contains("max_redirects"))
    let help = try await ChildProcess.runThumbd(["serve", "--help"])
    #expect(help.status == 0)
  }
}
