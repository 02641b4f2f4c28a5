import ImagePipeline
import Synchronization

/// A loader that counts calls and answers from a table; unknown URLs give HTTP 404.
final class CountingLoader: DataLoading {
  private let bodies: [String: [UInt8]]
  private let calls = Mutex<[String]>([])
  init(_ bodies: [String: [UInt8]]) { self.bodies = bodies }
  func loadData(for url: String) async throws -> [UInt8] {
    calls.withLock { $0.append(url) }
    guard let body = bodies[url] else { throw FetchError.httpStatus(404) }
    return body
  }
  var urls: [String] { calls.withLock { $0 } }
}
