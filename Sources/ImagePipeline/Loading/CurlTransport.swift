import CCurl
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The production transport: libcurl's multi interface on one thread of its own (CCurl).
///
/// One thread, not the daemon's event loop: the loop serves clients and must never wait for
/// TLS handshakes or libcurl's bookkeeping, and one libcurl thread keeps every origin
/// connection in one pool (measured in docs/BENCHMARKS.md). Connections are kept alive and
/// reused per origin, at most `connectionsPerHost` at once; HTTP/2 is used where the origin
/// offers it; TLS certificates are verified.
public final class CurlTransport: HTTPTransport {
  /// Settings of the libcurl client.
  public struct Options: Sendable, Hashable {
    /// Connections to one origin at once.
    public var connectionsPerHost: Int
    /// Idle connections kept for reuse, over all origins.
    public var idleConnections: Int
    /// Seconds an idle connection is kept.
    public var idleSeconds: Int
    /// SO_RCVBUF of origin sockets: what an origin can push before a cancel lands.
    public var receiveBuffer: Int
    /// A CA bundle file; nil for the system's.
    public var caFile: String?
    /// A directory of CA certificates; nil for the system's.
    public var caPath: String?
    /// The User-Agent header.
    public var userAgent: String

    /// Defaults: 8 connections per origin, 64 idle ones kept 30 s, 256 KiB receive windows.
    public init(
      connectionsPerHost: Int = 8, idleConnections: Int = 64, idleSeconds: Int = 30,
      receiveBuffer: Int = 256 << 10, caFile: String? = nil, caPath: String? = nil,
      userAgent: String = "thumbd"
    ) {
      self.connectionsPerHost = connectionsPerHost
      self.idleConnections = idleConnections
      self.idleSeconds = idleSeconds
      self.receiveBuffer = receiveBuffer
      self.caFile = caFile
      self.caPath = caPath
      self.userAgent = userAgent
    }
  }

  private let client: Client

  /// Loads libcurl and starts the client thread; `transport` errors say why not.
  public init(options: Options = Options()) throws(FetchError) {
    client = try Client(options)
  }

  /// Sockets opened so far: with keep-alive, far fewer than requests.
  public var connectionsOpened: Int { Int(cc_connections_opened(client.pointer)) }

  /// Transfers queued or running.
  public var activeTransfers: Int { Int(cc_active(client.pointer)) }

  /// See `HTTPTransport`.
  public func start(
    _ request: TransportRequest, receiver: any TransportReceiver
  ) -> any TransportTransfer {
    let exchange = Exchange(client: client, receiver: receiver, allow: request.allowAddress)
    let context = Unmanaged.passRetained(exchange).toOpaque()
    var handlers = cc_handlers()
    handlers.context = context
    handlers.allow_address = { context, family, bytes, _ in
      let exchange = Unmanaged<Exchange>.fromOpaque(context!).takeUnretainedValue()
      let buffer = UnsafeBufferPointer(start: bytes, count: family == 4 ? 4 : 16)
      guard let address = IPAddress(bytes: buffer) else { return 0 }
      return exchange.allow(address) ? 1 : 0
    }
    handlers.head = { context, text, length in
      let exchange = Unmanaged<Exchange>.fromOpaque(context!).takeUnretainedValue()
      let bytes = UnsafeRawBufferPointer(start: text, count: length)
      do throws(ResponseHead.ParseError) {
        let head = try ResponseHead(parsing: bytes)
        return exchange.receiver.receive(head: head) ? 0 : 1
      } catch {
        exchange.failure = (.protocolViolation, error.message)
        return 1
      }
    }
    handlers.body = { context, bytes, length in
      let exchange = Unmanaged<Exchange>.fromOpaque(context!).takeUnretainedValue()
      return exchange.receiver.receive(body: UnsafeRawBufferPointer(start: bytes, count: length))
        ? 0 : 1
    }
    handlers.done = { context, status, message in
      let exchange = Unmanaged<Exchange>.fromOpaque(context!).takeRetainedValue()
      let text = message.map { String(cString: $0) } ?? ""
      exchange.receiver.finish(exchange.end(status, text))
    }
    let id = Self.withRequest(request) { cRequest in
      cc_start(client.pointer, &cRequest, &handlers)
    }
    guard id != 0 else {
      Unmanaged<Exchange>.fromOpaque(context).release()
      receiver.finish(.failed(.other, "the transfer could not be started"))
      return exchange
    }
    exchange.id.store(id, ordering: .releasing)
    return exchange
  }

  /// Builds the C request; its strings live for the call only (CCurl copies them).
  private static func withRequest<T>(
    _ request: TransportRequest, _ body: (inout cc_request) -> T
  ) -> T {
    let lines = request.headers.map { strdup("\($0.name): \($0.value)") }
    defer { for line in lines { free(line) } }
    var resolve: String?
    if !request.addresses.isEmpty {
      let list = request.addresses.map { address -> String in
        if case .v6 = address { return "[\(address)]" }
        return address.description
      }
      // "+": an entry that expires like any cached answer (CURLOPT_RESOLVE).
      resolve = "+\(request.url.host):\(request.url.port):" + list.joined(separator: ",")
    }
    let url = request.url.description
    return url.withCString { cURL in
      lines.map { $0.map { UnsafePointer<CChar>($0) } }.withUnsafeBufferPointer { headers in
        func run(_ cResolve: UnsafePointer<CChar>?) -> T {
          var cRequest = cc_request(
            url: cURL, headers: headers.baseAddress, header_count: headers.count,
            resolve: cResolve, head_timeout_ms: milliseconds(request.headTimeout),
            total_timeout_ms: milliseconds(request.totalTimeout),
            max_body_bytes: Int64(request.maxBodyBytes))
          return body(&cRequest)
        }
        if let resolve { return resolve.withCString { run($0) } }
        return run(nil)
      }
    }
  }

  private static func milliseconds(_ seconds: Double) -> UInt32 {
    UInt32(clamping: Int((max(0.001, seconds) * 1000).rounded(.up)))
  }

  /// Owns the C client; freed when the last transport and exchange let go.
  final class Client: @unchecked Sendable {
    // @unchecked: the C client is thread-safe (CCurl.h).
    let pointer: OpaquePointer

    init(_ options: Options) throws(FetchError) {
      var error = [CChar](repeating: 0, count: 256)
      let created: OpaquePointer? = withOptionalCString(options.caFile) { caFile in
        withOptionalCString(options.caPath) { caPath in
          options.userAgent.withCString { agent in
            var cOptions = cc_options(
              connections_per_host: options.connectionsPerHost,
              connection_cache: options.idleConnections, receive_buffer: options.receiveBuffer,
              idle_seconds: options.idleSeconds, ca_file: caFile, ca_path: caPath,
              user_agent: agent)
            return cc_client_create(&cOptions, &error, error.count)
          }
        }
      }
      guard let created else {
        throw .transport(String(decoding: error.prefix { $0 != 0 }.map(UInt8.init), as: UTF8.self))
      }
      pointer = created
    }

    deinit { cc_client_destroy(pointer) }
  }

  /// One exchange: what the C handlers need, and the handle `cancel` uses.
  final class Exchange: TransportTransfer, @unchecked Sendable {
    // @unchecked: `failure` is touched only on the client thread, by the handlers.
    let client: Client
    let receiver: any TransportReceiver
    let allow: @Sendable (IPAddress) -> Bool
    let id = Atomic<UInt64>(0)
    var failure: (TransportFailure, String)?

    init(
      client: Client, receiver: any TransportReceiver,
      allow: @escaping @Sendable (IPAddress) -> Bool
    ) {
      self.client = client
      self.receiver = receiver
      self.allow = allow
    }

    func cancel() {
      let id = id.load(ordering: .acquiring)
      if id != 0 { cc_cancel(client.pointer, id) }
    }

    func end(_ status: cc_status, _ message: String) -> TransportEnd {
      switch status {
      case CC_OK: return .complete
      case CC_CANCELLED: return .cancelled
      case CC_STOPPED:
        if let failure { return .failed(failure.0, failure.1) }
        return .stopped
      case CC_HEAD_TIMEOUT: return .failed(.headTimeout, message)
      case CC_TIMEOUT: return .failed(.timeout, message)
      case CC_ADDRESS_REFUSED: return .failed(.addressRefused, message)
      case CC_CONNECT_FAILED, CC_RESOLVE_FAILED: return .failed(.connect, message)
      case CC_TLS_FAILED: return .failed(.tls, message)
      case CC_RESET: return .failed(.reset, message)
      case CC_TOO_LARGE: return .failed(.tooLarge, message)
      case CC_HEAD_TOO_LARGE: return .failed(.protocolViolation, "response head too large")
      case CC_PROTOCOL: return .failed(.protocolViolation, message)
      case CC_UNAVAILABLE: return .failed(.unavailable, message)
      default: return .failed(.other, message)
      }
    }
  }
}

private func withOptionalCString<T>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> T) -> T {
  guard let text else { return body(nil) }
  return text.withCString { body($0) }
}
