import ImagePipeline
import ThumbClient

/// Entry points for the fuzz targets (`Sources/FuzzTargets`) into the server's internal
/// parsers. Behind the `Fuzzing` SPI, so no other client sees them.
@_spi(Fuzzing) public enum ServerFuzzing {
  /// What a client frame asks for, checked as a session checks it: a short description
  /// (`load`, `prefetch 3 items`, ...) or the `bad_frame` message.
  public static func clientRequest(_ frame: SessionFrame) -> Result<String, SessionFrameError> {
    do throws(SessionFrameError) {
      switch try ClientRequest.parse(frame, parameters: ThumbnailParameters()) {
      case .load(let load): return .success("load \(load.slot) \(load.token)")
      case .cancel(let slot, let token): return .success("cancel \(slot) \(token)")
      case .prefetch(let prefetch): return .success("prefetch \(prefetch.items.count) items")
      case .release(let round): return .success("release \(round)")
      case .priority(let slot, _, _): return .success("priority \(slot)")
      }
    } catch {
      return .failure(error)
    }
  }

  /// The image and priority a `/v1/thumbnail` request asks for, or the status refusing it.
  public static func thumbnailRequest(
    _ request: HTTPRequest
  ) -> Result<(ImageRequest, ImagePriority), HTTPStatusCode> {
    switch ThumbnailRoute.parse(request, parameters: ThumbnailParameters()) {
    case .request(let image, let priority): return .success((image, priority))
    case .rejected(let response): return .failure(HTTPStatusCode(response.status))
    }
  }

  /// A refusal's status, as an error.
  public struct HTTPStatusCode: Error, Hashable {
    /// The status sent.
    public let status: Int
    init(_ status: Int) { self.status = status }
  }
}
