import ImagePipeline
import ThumbProtocol

/// Entry points for the fuzz targets (`Sources/FuzzTargets`) into the server's internal
/// parsers. `package`, as every cross-target internal API is, so no client outside the
/// package sees them.
package enum ServerFuzzing {
  /// Applies `messages` to a fresh session state (as a session would, finishing each started
  /// piece of work at once, alternately with success and failure), then closes it. Returns
  /// the messages it would have sent, and whether every byte of session memory came back.
  package static func session(
    _ messages: [ClientMessage]
  ) -> (sent: [ServerMessage], memoryReturned: Bool) {
    let memory = SessionMemory(limit: 1 << 20, perSession: 256 << 10)
    var state = SessionState(parameters: ThumbnailParameters(), memory: memory)
    var sent: [ServerMessage] = []
    var started: [(SessionState.WorkID, SessionState.Purpose)] = []
    func collect(_ effects: [SessionState.Effect]) {
      for effect in effects {
        switch effect {
        case .send(let message): sent.append(message)
        case .start(let work, _, _, let purpose, _): started.append((work, purpose))
        default: break
        }
      }
    }
    for (index, message) in messages.enumerated() {
      collect(state.apply(message))
      // Every other step, the oldest started work comes back.
      if index % 2 == 1, !started.isEmpty {
        let (work, purpose) = started.removeFirst()
        collect(state.finished(work, purpose, .failure(.queueFull)))
      }
    }
    collect(state.close())
    return (sent, memory.used == 0)
  }

  /// The image and priority a `/v1/thumbnail` request asks for, or the status refusing it.
  package static func thumbnailRequest(
    _ request: HTTPRequest
  ) -> Result<(ImageRequest, ImagePriority), HTTPStatusCode> {
    switch ThumbnailRoute.parse(request, parameters: ThumbnailParameters(presets: fuzzPresets)) {
    case .request(let image, let priority, _): return .success((image, priority))
    case .rejected(let response): return .failure(HTTPStatusCode(response.status))
    }
  }

  /// An imgproxy-style target read as the path route reads it: its signature segment, the
  /// part it signs, and the spec and source asked for, or the status refusing it; nil when
  /// the target is not in the path form.
  package static func imgproxyPath(
    _ target: String
  ) -> (
    signature: Substring, signed: Substring, asked: Result<(ThumbnailSpec, String), HTTPStatusCode>
  )? {
    // Presets-only mode reads the same bytes another way: exercised on every input too.
    if let listed = ImgproxyPath(target: target, presetsOnly: true),
      case .success(let request) = listed.parse(presets: fuzzPresetsOnly)
    {
      _ = ThumbnailParameters().spec(request.options)
    }
    guard let path = ImgproxyPath(target: target) else { return nil }
    switch path.parse(presets: fuzzPresets) {
    case .failure: return (path.signature, path.signed, .failure(HTTPStatusCode(400)))
    case .success(let request):
      switch ThumbnailParameters().spec(request.options) {
      case .failure: return (path.signature, path.signed, .failure(HTTPStatusCode(400)))
      case .success(let spec):
        return (path.signature, path.signed, .success((spec.spec, request.source)))
      }
    }
  }

  /// The presets the path fuzzer's inputs may name (`pr:card`, `pr:a:b`, `/card:webp/`).
  private static let fuzzPresets = try! Presets(
    definitions: ["card=rs:fill:64:48/q:70", "webp=f:webp", "default=dpr:2", "a=w:1", "b=h:2"],
    only: false)
  private static let fuzzPresetsOnly = try! Presets(
    definitions: ["card=rs:fill:64:48/q:70", "webp=f:webp"], only: true)

  /// A refusal's status, as an error.
  package struct HTTPStatusCode: Error, Hashable {
    /// The status sent.
    package let status: Int
    init(_ status: Int) { self.status = status }
  }
}
