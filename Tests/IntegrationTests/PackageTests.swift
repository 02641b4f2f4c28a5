import Foundation
import Testing

@testable import TestSupport

/// Package.swift as a consumer's SwiftPM reads it: products depended on by version may not use
/// unsafe flags, and system libraries are declared, not hidden in linker flags.
@Suite("The Swift package")
struct PackageTests {
  /// `swift package dump-package` of this repository, with a scratch folder of its own (the
  /// running `swift test` holds the lock of `.build`).
  static func manifest() throws -> [String: Any] {
    let scratch = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [
      "swift", "package", "--package-path", Repository.root, "--scratch-path", scratch,
      "dump-package",
    ]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
  }

  /// The names of `target` and every target it depends on, within the package.
  static func closure(of target: String, in targets: [String: [String: Any]]) -> Set<String> {
    var seen: Set<String> = []
    var pending = [target]
    while let name = pending.popLast() {
      guard seen.insert(name).inserted, let entry = targets[name] else { continue }
      for dependency in entry["dependencies"] as? [[String: Any]] ?? [] {
        // {"byName": [NAME, null]} or {"target": [NAME, null]}; products of other packages
        // ({"product": ...}) are not this package's targets.
        for key in ["byName", "target"] {
          if let name = (dependency[key] as? [Any])?.first as? String { pending.append(name) }
        }
      }
    }
    return seen
  }

  @Test("no target a library product is built from uses unsafe flags")
  func noUnsafeFlags() throws {
    let manifest = try Self.manifest()
    let targets = Dictionary(
      uniqueKeysWithValues: (manifest["targets"] as? [[String: Any]] ?? []).compactMap {
        entry -> (String, [String: Any])? in
        (entry["name"] as? String).map { ($0, entry) }
      })
    let libraries = (manifest["products"] as? [[String: Any]] ?? []).filter {
      ($0["type"] as? [String: Any])?["library"] != nil
    }
    #expect(
      Set(libraries.compactMap { $0["name"] as? String }).isSuperset(of: [
        "ImagePipeline", "ThumbProtocol", "ThumbClient",
      ]))
    var checked: Set<String> = []
    for product in libraries {
      for root in product["targets"] as? [String] ?? [] {
        checked.formUnion(Self.closure(of: root, in: targets))
      }
    }
    #expect(checked.contains("CImageCodecs") && checked.contains("CLibJPEG"))
    for name in checked.sorted() {
      let entry = try #require(targets[name])
      let settings = try JSONSerialization.data(withJSONObject: entry["settings"] ?? [])
      #expect(
        !String(decoding: settings, as: UTF8.self).contains("unsafeFlags"),
        "\(name) uses unsafe flags")
    }
    // Every system library is found through pkg-config, with the Debian package to install.
    // libcurl, libheif, libjxl, libavcodec and libsystemd are opened with dlopen (cs_bind),
    // so none of them.
    let system = targets.values.filter { $0["type"] as? String == "system" }
    #expect(
      Set(system.compactMap { $0["name"] as? String }) == [
        "CLibJPEG", "CLibPNG", "CZlib", "CLibWebP", "CLibWebPDemux", "CLibWebPMux", "CGIF",
        "CLCMS2", "CLibTIFF",
      ])
    for entry in system {
      #expect(entry["pkgConfig"] as? String != nil, "\(entry["name"] ?? "?") has no pkgConfig")
      #expect(
        String(describing: entry["providers"] ?? "").contains("apt"),
        "\(entry["name"] ?? "?") names no apt package")
    }
  }
}
