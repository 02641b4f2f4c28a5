import ImagePipeline
import Synchronization

/// A loader that counts calls and answers from a table; unknown URLs give HTTP 404.
final class CountingLoader: DataLoading {
  private let bodies: [String: [UInt8]]
  private let calls = Mutex<[String]>([])
  init(_ bodies: [String: [UInt8]]) { self.bodies = bodies }
  func load(_ request: SourceRequest) async throws -> SourceResponse {
    calls.withLock { $0.append(request.url) }
    guard let body = bodies[request.url] else { throw FetchError.httpStatus(404) }
    return .modified(body, .unversioned())
  }
  var urls: [String] { calls.withLock { $0 } }
}
