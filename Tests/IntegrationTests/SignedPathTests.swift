import Foundation
import Testing
import ThumbProtocol
import ThumbServer
import ThumbSystem
import ThumbWire

@testable import Loopback
@testable import TestSupport

/// imgproxy-style signed paths through the real daemon, over TCP, with a real origin on
/// loopback: right ones are served as asked; every wrong one is refused before the origin or
/// a decoder sees anything.
@Suite("Signed paths", .serialized, .onLane(.clients))
struct SignedPathTests {
  static let photo = try! Corpus.bytes("photo/coil/normal.jpg")
  static let signing = try! URLSignature(keys: ["736563726574"], salts: ["68656c6c6f"])

  final class Setup: Sendable {
    let origin: LoopbackOrigin
    let daemon: TestDaemon
    let port: UInt16

    init(_ extra: [String] = []) async throws {
      origin = try LoopbackOrigin { _ in .init(body: SignedPathTests.photo) }.start()
      daemon = try await TestDaemon.start(
        [
          "--allow-network", "127.0.0.0/8", "--cache-dir", "", "--listen", "127.0.0.1:0",
          "--signing-key", "736563726574", "--signing-salt", "68656c6c6f",
        ] + extra, driver: .inProcess)
      port = try #require(SessionTests.tcpPort(in: daemon.log))
    }

    func stop() {
      daemon.stop()
      origin.stop()
    }

    func get(
      _ target: String, headers: [String] = [], from: String? = nil
    ) -> (status: Int, head: String, body: [UInt8]) {
      let response = SocketClient.getTCP(port: port, target, headers: headers, from: from)
      let body = SocketClient.body(of: response)
      let head = String(decoding: response.prefix(response.count - body.count), as: UTF8.self)
      return (SocketClient.status(of: response), head, body)
    }

    var decodes: Double { daemon.metric("thumbd_decodes_total") ?? -1 }
  }

  /// Width and height of a PNG (IHDR) or a JPEG (first SOFn).
  static func size(_ bytes: [UInt8]) -> (Int, Int)? {
    if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]), bytes.count > 24 {
      let read = { (at: Int) in bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
      return (read(16), read(20))
    }
    var index = 2
    while index + 9 < bytes.count, bytes[index] == 0xFF {
      let marker = bytes[index + 1]
      let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
      if (0xC0...0xC3).contains(marker) {
        return (
          Int(bytes[index + 7]) << 8 | Int(bytes[index + 8]),
          Int(bytes[index + 5]) << 8 | Int(bytes[index + 6])
        )
      }
      index += 2 + length
    }
    return nil
  }

  @Test("a signed plain path and a signed Base64 path (split by slashes) are served as asked")
  func served() async throws {
    let setup = try await Setup()
    defer { setup.stop() }
    let source = setup.origin.url("/photo.jpg")
    let plain = Self.signing.signedPath(
      "/rs:fit:200:150/plain/" + PercentEncoding.encode(source) + "@png")
    let first = setup.get(plain)
    #expect(first.status == 200 && first.head.contains("Content-Type: image/png"))
    let fitted = try #require(Self.size(first.body))
    #expect(
      max(fitted.0, fitted.1) <= 200 && fitted.1 <= 150 && (fitted.0 == 200 || fitted.1 == 150))
    let encoded = Base64.urlSafe(Array(source.utf8))
    let split = encoded.enumerated().map {
      $0.offset > 0 && $0.offset % 16 == 0 ? "/\($0.element)" : "\($0.element)"
    }.joined()
    let base64 = Self.signing.signedPath("/rs:fill:64:64/g:ce/" + split + ".jpg")
    let second = setup.get(base64)
    #expect(second.status == 200 && second.head.contains("Content-Type: image/jpeg"))
    #expect(Self.size(second.body).map { [$0.0, $0.1] } == [64, 64])
    // An option thumbd does not do is refused naming it, signed or not.
    let refused = setup.get(
      Self.signing.signedPath("/exar:1/plain/" + PercentEncoding.encode(source)))
    #expect(
      refused.status == 400 && String(decoding: refused.body, as: UTF8.self).contains("'exar'"))
    let trimmed = setup.get(
      Self.signing.signedPath("/rs:fit:50:50/t:10/plain/" + PercentEncoding.encode(source)))
    #expect(trimmed.status == 200, "trim is served")
  }

  @Test("every wrong signature is refused before any work: the origin and the decoders see nothing")
  func refusedBeforeWork() async throws {
    let setup = try await Setup()
    defer { setup.stop() }
    let source = setup.origin.url("/refused.jpg")
    let path = "/rs:fit:100:100/plain/" + PercentEncoding.encode(source)
    let right = Self.signing.sign(path)
    var flipped = Array(right.utf8)
    flipped[3] ^= 0x01
    let wrongKey = try URLSignature(keys: ["736563726575"], salts: ["68656c6c6f"])
    let targets = [
      "/" + String(decoding: flipped, as: UTF8.self) + path,
      "/" + right.dropLast(2) + path,
      "/" + Self.signing.sign("/rs:fit:100:101/plain/x") + path,
      "/" + right + "=" + path,
      "/" + wrongKey.sign(path) + path,
      "/insecure" + path,
      // Percent-encoding changed after signing: ':' of the source sent as %3A no more.
      "/" + right + path.replacing("%3A", with: ":"),
    ]
    let decodes = setup.decodes
    for target in targets {
      let answer = setup.get(target)
      #expect(
        answer.status == 403
          && String(decoding: answer.body, as: UTF8.self).contains("invalid_signature"),
        "\(target): \(answer.status)")
    }
    // An empty signature is no path form at all.
    #expect(setup.get("/" + path).status == 404)
    #expect(setup.origin.requests.isEmpty, "the origin was asked: \(setup.origin.requests)")
    #expect(setup.decodes == decodes)
    #expect(setup.daemon.metric("thumbd_invalid_signatures_total") == Double(targets.count))
    // A right signature for a source the policy refuses: the origin still sees nothing.
    let refused = setup.get(
      Self.signing.signedPath(
        "/rs:fit:100:100/plain/" + PercentEncoding.encode("http://10.255.0.1/x.jpg")))
    #expect(refused.status == 403 && setup.origin.requests.isEmpty)
  }

  @Test(
    "with keys, the TCP listener refuses the unsigned query form unless allow_unsigned_tcp; the Unix socket takes it"
  )
  func unsignedQueryForm() async throws {
    let setup = try await Setup()
    defer { setup.stop() }
    let query = "/v1/thumbnail?w=64&h=64&url=" + PercentEncoding.encode(setup.origin.url("/q.jpg"))
    let overTCP = setup.get(query)
    #expect(
      overTCP.status == 403
        && String(decoding: overTCP.body, as: UTF8.self).contains("unsigned_request"))
    #expect(setup.origin.requests.isEmpty)
    #expect(SocketClient.get(setup.daemon.socket, query).status == 200)
    let open = try await Setup(["--allow-unsigned-tcp"])
    defer { open.stop() }
    let allowed = open.get(
      "/v1/thumbnail?w=64&h=64&url=" + PercentEncoding.encode(open.origin.url("/q.jpg")))
    #expect(allowed.status == 200)
  }
}
