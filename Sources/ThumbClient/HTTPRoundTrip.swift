import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// One blocking HTTP/1.1 GET to thumbd on a connected stream socket (its Unix socket or TCP),
/// for clients that use plain HTTP instead of sessions: thumbload's HTTP target and
/// `thumbd warm`. The response head is bounded, and the body is read by its Content-Length,
/// at most `maxBody` bytes.
public enum HTTPRoundTrip {
  /// A response: status, header fields (names in lower case), body.
  public struct Reply: Sendable {
    /// The status code.
    public let status: Int
    /// Header fields by lower-case name (the last of repeated ones).
    public let headers: [String: String]
    /// The body.
    public let body: [UInt8]
    /// Whether the connection may carry another request.
    public let keepAlive: Bool
  }

  /// What became of an exchange.
  public enum Outcome: Sendable {
    /// A whole response.
    case reply(Reply)
    /// The peer closed before any byte of a response (a kept-alive connection it had
    /// closed: retry on a new one).
    case closedBeforeReply
    /// Anything else: an error, a head or body over the bounds, a cut response.
    case failed
  }

  /// The longest response head read.
  public static let maxHead = 64 << 10

  /// Sends `GET target` with `headers` on `fd` and reads the response.
  public static func get(
    fd: Int32, target: String, headers: [(String, String)] = [], maxBody: Int = 64 << 20
  ) -> Outcome {
    CooperativePool.willBlock("HTTPRoundTrip.get")
    var text = "GET \(target) HTTP/1.1\r\nHost: thumbd\r\n"
    for (name, value) in headers { text += "\(name): \(value)\r\n" }
    let request = Array((text + "\r\n").utf8)
    var sent = 0
    while sent < request.count {
      let n = request[sent...].withUnsafeBytes {
        send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return sent == 0 ? .closedBeforeReply : .failed }
      sent += n
    }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    var headEnd: Int?
    var expected = 0
    var fields: [String: String] = [:]
    var status = 0
    while headEnd == nil || received.count < headEnd! + expected {
      let n = read(fd, &buffer, buffer.count)
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return received.isEmpty ? .closedBeforeReply : .failed }
      received += buffer[0..<n]
      guard headEnd == nil else { continue }
      guard let end = received.firstRange(of: [13, 10, 13, 10]) else {
        if received.count > maxHead { return .failed }
        continue
      }
      headEnd = end.upperBound
      // The same parser the fetcher reads origins with: a malformed head, or conflicting
      // lengths, fail the exchange instead of being guessed at.
      let head: ResponseHead
      let declared: Int?
      do {
        head = try ResponseHead(parsing: received[..<end.lowerBound])
        declared = try head.declaredLength()
      } catch { return .failed }
      status = head.status
      for field in head.fields { fields[field.name] = field.value }
      let length = declared ?? 0
      guard length <= maxBody else { return .failed }
      expected = length
    }
    let body = Array(received[headEnd!..<(headEnd! + expected)])
    return .reply(
      Reply(
        status: status, headers: fields, body: body,
        keepAlive: fields["connection"]?.lowercased() != "close"))
  }
}
