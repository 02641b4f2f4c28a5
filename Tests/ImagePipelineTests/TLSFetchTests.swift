import Foundation
import Testing

@testable import ImagePipeline
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// https through libcurl against real nginx on loopback with a certificate from a CA the test
/// makes: certificates are verified (the system's CAs refuse it, the test's CA file accepts
/// it), and HTTP/2 is used where the origin offers it.
@Suite("Fetch over TLS", .serialized)
struct TLSFetchTests {
  /// A CA, a server certificate for `origin.test` signed by it, and nginx serving a directory
  /// over TLS with HTTP/2 on a free loopback port, logging each request's protocol.
  final class TLSOrigin: @unchecked Sendable {
    // @unchecked: immutable after init; the process is only terminated in stop().
    let directory: String
    let port: UInt16
    let caFile: String
    private let nginx: Process

    init(serving files: [String: [UInt8]]) async throws {
      directory =
        FileManager.default.temporaryDirectory
        .appendingPathComponent("thumbd-tls-\(UUID().uuidString.prefix(8))").path
      let www = directory + "/www"
      try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
      for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: www + name)) }
      caFile = directory + "/ca.pem"
      let directory = self.directory
      try await offPool {
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        try Self.shell(
          """
          cd \(directory) && openssl req -x509 \(ec) -keyout ca.key -out ca.pem -days 2 \
            -subj /CN=thumbd-test-ca 2>/dev/null \
          && openssl req \(ec) -keyout server.key -out server.csr -subj /CN=origin.test 2>/dev/null \
          && printf 'subjectAltName=DNS:origin.test\\n' > san.ext \
          && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
            -out server.pem -days 2 -extfile san.ext 2>/dev/null
          """)
      }
      port = TestPorts.unused()
      let config = """
        worker_processes 1; pid \(directory)/nginx.pid; error_log \(directory)/error.log warn;
        events { worker_connections 256; }
        http {
          log_format protocol '$server_protocol $uri';
          access_log \(directory)/access.log protocol;
          client_body_temp_path \(directory); proxy_temp_path \(directory);
          fastcgi_temp_path \(directory); uwsgi_temp_path \(directory); scgi_temp_path \(directory);
          server {
            listen 127.0.0.1:\(port) ssl http2;
            ssl_certificate \(directory)/server.pem; ssl_certificate_key \(directory)/server.key;
            root \(www);
          }
        }
        """
      try config.write(toFile: directory + "/nginx.conf", atomically: true, encoding: .utf8)
      nginx = Process()
      nginx.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
      nginx.arguments = ["-c", directory + "/nginx.conf", "-g", "daemon off;"]
      try nginx.run()
      let port = self.port
      let nginx = self.nginx
      await eventually("nginx listening") { isListening(port) || !nginx.isRunning }
      // Listening, but not nginx (it exited, unable to bind): fail here, not with another
      // server's answers.
      guard nginx.isRunning else { throw POSIXError(.EADDRINUSE) }
    }

    /// The protocols nginx logged, one per request.
    var protocols: [String] {
      ((try? String(contentsOfFile: directory + "/access.log", encoding: .utf8)) ?? "")
        .split(separator: "\n").map { String($0.split(separator: " ").first ?? "") }
    }

    func stop() {
      nginx.terminate()
      nginx.waitUntilExit()
      try? FileManager.default.removeItem(atPath: directory)
    }

    private static func shell(_ script: String) throws {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/bin/sh")
      process.arguments = ["-c", script]
      try process.run()
      process.waitUntilExit()
      guard process.terminationStatus == 0 else { throw POSIXError(.EIO) }
    }
  }

  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")

  /// `origin.test` is the name in the certificate; the resolver says it is loopback.
  static func loader(caFile: String?) throws -> SourceLoader {
    SourceLoader(
      policy: SourcePolicy(allowedNetworks: IPNetwork.loopback),
      limits: FetchLimits(connectTimeout: 5, totalTimeout: 10),
      transport: try CurlTransport(options: .init(caFile: caFile)),
      resolver: RecordingResolver { _ in [.v4(127, 0, 0, 1)] })
  }

  @Test("an https origin is verified against the configured CA and fetched over HTTP/2")
  func verifiedAndHTTP2() async throws {
    let origin = try await TLSOrigin(serving: ["/photo.jpg": Self.photo])
    defer { origin.stop() }
    let url = "https://origin.test:\(origin.port)/photo.jpg"
    let trusted = try Self.loader(caFile: origin.caFile)
    #expect(try await trusted.loadData(for: url) == Self.photo)
    #expect(try await trusted.loadData(for: url) == Self.photo)
    // nginx logs a request after it has sent the answer: wait for the lines, then read them.
    await eventually("nginx logged both requests") { origin.protocols.count >= 2 }
    #expect(origin.protocols == ["HTTP/2.0", "HTTP/2.0"])
    // Two requests, one connection: multiplexed and kept alive.
    #expect(trusted.connectionsOpened == 1)
    // The system's CAs do not know the test's CA: verification is on.
    let untrusted = try Self.loader(caFile: nil)
    await #expect {
      try await untrusted.loadData(for: url)
    } throws: { error in
      guard case FetchError.transport(let message) = error else { return false }
      return message.hasPrefix("TLS")
    }
    #expect(origin.protocols.count == 2, "the unverified origin was sent a request")
  }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
private func isListening(_ port: UInt16) -> Bool {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  defer { close(fd) }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_port = port.bigEndian
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  return withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
    }
  }
}
