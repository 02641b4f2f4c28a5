import Foundation
import Testing

@testable import TestSupport
@testable import ThumbServer

/// nginx in front of thumbd caches by `proxy_cache_key`: a parameter that shapes the image
/// and is missing from the key makes nginx serve one variant for another (`colour=keep` got
/// the cached sRGB bytes without their profile). Every shipped config's key is held to the
/// list of parameters the query parser reads, so the next parameter cannot be forgotten.
@Suite("nginx cache keys")
struct NginxKeyTests {
  static let configs = ["Config/nginx/thumbd.conf", "Config/nginx/thumbd-cluster.conf"]

  /// The `proxy_cache_key` lines of `text` keyed by query parameters: a key on the whole
  /// `$request_uri` (the signed path form, whose Vary nginx honours) holds them all.
  static func queryKeys(_ text: String) -> [Substring] {
    text.split(separator: "\n").filter {
      $0.trimmingCharacters(in: .whitespaces).hasPrefix("proxy_cache_key")
        && !$0.contains("$request_uri")
    }
  }

  /// The `$arg_` names in each query-keyed `proxy_cache_key` of `text`.
  static func keyedArguments(_ text: String) -> [[String]] {
    queryKeys(text).map { line in
      line.components(separatedBy: "$arg_").dropFirst().map {
        String($0.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
      }
    }
  }

  @Test(
    "every shipped nginx cache key names every parameter that shapes the answer", arguments: configs
  )
  func keysNameEveryParameter(config: String) throws {
    let text = try String(contentsOfFile: Repository.root + "/" + config, encoding: .utf8)
    let keys = Self.keyedArguments(text)
    #expect(!keys.isEmpty, "\(config) has no proxy_cache_key")
    let needed = ThumbnailRoute.ThumbnailQuery.allCases.filter(\.shapesAnswer).map(\.rawValue)
    for key in keys {
      let missing = needed.filter { !key.contains($0) }
      #expect(missing.isEmpty, "\(config): the cache key leaves out \(missing)")
      let unknown = key.filter { name in
        !ThumbnailRoute.ThumbnailQuery.allCases.contains { $0.rawValue == name }
      }
      #expect(
        unknown.isEmpty,
        "\(config): the cache key names parameters thumbd does not read: \(unknown)")
    }
    // Client hints shape the image too when client_hints is on; those keys ignore Vary.
    let hints = (ClientHints.dprHeaders + ClientHints.widthHeaders).map {
      "$http_" + $0.lowercased().replacing("-", with: "_")
    }
    for line in Self.queryKeys(text) {
      #expect(hints.allSatisfy { line.contains($0) }, "\(config): \(line) leaves out a hint")
    }
  }
}
