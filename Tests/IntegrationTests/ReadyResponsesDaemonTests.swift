import Foundation
import Loopback
import Synchronization
import Testing
import ThumbSystem
import ThumbWire

@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// The event loops' tables of ready responses (`ReadyResponses`) through the real daemon:
/// clients on threads of their own send pipelined requests that vary every header a route
/// reads, while the source is replaced and purged under them. Every answer must be for the
/// request's own variant and never older than the source was when the request was sent.
@Suite("Ready responses through the daemon", .onLane(.clients))
struct ReadyResponsesDaemonTests {
  /// One request as it was sent.
  struct Sent {
    var size: Int
    /// The `format` parameter, if any.
    var format: String?
    var acceptsWebP: Bool
    var acceptsAVIF: Bool
    /// The ETag sent in `If-None-Match`, if any.
    var etag: String?
    /// The newest version in place before the request was sent.
    var known: Int

    /// Requests that must get the same format.
    var formatKey: String { "\(size) \(format ?? "-") \(acceptsWebP) \(acceptsAVIF)" }

    /// Whether a thumbnail of `type` may answer this request at all.
    func allows(_ type: String) -> Bool {
      if let format { return type == "image/" + format }
      return type == "image/jpeg" || type == "image/png" || (acceptsWebP && type == "image/webp")
        || (acceptsAVIF && type == "image/avif")
    }
  }

  /// What the clients saw, shared.
  struct Seen {
    /// Each ETag's size, type and version, as its first 200 showed.
    var etags: [String: (size: Int, type: String, version: Int)] = [:]
    /// The content type each `Sent.formatKey` got first.
    var types: [String: String] = [:]
    var memoryHits = 0
    var answers = 0
  }

  /// `Seen` behind a lock, for the clients' threads.
  final class Shared: Sendable {
    let seen = Mutex(Seen())
  }

  @Test(
    "randomised: varied Accept, format, size, client, If-None-Match and parameter order, pipelined, while the file is replaced and purged; no answer is older than its request or for another variant"
  )
  func underChanges() async throws {
    let seed = UInt64(Date().timeIntervalSince1970 * 1000)
    let (directory, root, photo) = try FreshnessTests.fileRoot()
    let versions = FreshnessTests.Versions(path: photo)
    try Data(FreshnessTests.Versions.picture(0)).write(to: URL(fileURLWithPath: photo))
    // A process (load; and in-process, whole rounds found their connection closed with
    // nothing read: see ARCHITECTURE's round-three counts).
    let daemon = try await TestDaemon.start(
      ["--file-root", root, "--cache-dir", ""], directory: directory)
    defer { daemon.stop() }
    let url = "file://" + photo
    let encoded = url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    let socket = daemon.socket
    let shared = Shared()

    let failures = await withTaskGroup(of: [String].self) { group in
      for client in 0..<6 {
        group.addTask {
          await FreshnessTests.offPool {
            var random = SeededRandom(seed: seed &+ UInt64(client))
            var failures: [String] = []
            // The ETag this client last got for each kind of request, sent back as a
            // browser revalidating would.
            var own: [String: String] = [:]
            for round in 0..<40 {
              let fd = SocketClient.connect(socket)
              let connectError = fd < 0 ? errno : 0
              var sent: [Sent] = []
              // A burst repeats one request, as a page showing a picture twice does: the
              // repeats read in one pass share one check, and a change between sends must
              // still be seen by every request sent after it.
              let burst = random.next() % 3 == 0
              let batch = burst ? 3 + Int(random.next() % 3) : 1 + Int(random.next() % 3)
              var previous: (Sent, String)?
              var received: [UInt8] = []
              for index in 0..<batch {
                // Half the repeats wait for the answers before them, so the source may
                // change after the check that answered them: a request sent after the change
                // must not share that check.
                if burst && index > 0 && random.next() % 2 == 0 {
                  received += Self.read(fd, until: sent.count, after: received)
                }
                var known = versions.newest
                switch random.next() % (burst ? 3 : 16) {
                case 0 where known < 240: known = versions.change()  // pictures hold 256
                case 1:
                  let purged = SocketClient.request(
                    socket, "DELETE", "/v1/source?url=\(encoded)")
                  if SocketClient.status(of: purged) != 200 { failures.append("purge failed") }
                default: break
                }
                var request =
                  burst && previous != nil
                  ? previous!
                  : Self.request(
                    &random, client: client, known: known, own: own,
                    etags: shared.seen.withLock { Array($0.etags.keys).sorted() })
                request.0.known = known
                previous = request
                var parameters = ["url=\(encoded)", "w=\(request.0.size)", "h=\(request.0.size)"]
                if let format = request.0.format { parameters.append("format=\(format)") }
                // The same parameters in another order name the same answer: one kept
                // response under every name, which a change or a purge must end for all.
                parameters.shuffle(using: &random)
                var text = "GET /v1/thumbnail?" + parameters.joined(separator: "&")
                text += " HTTP/1.1\r\nHost: thumbd\r\n" + request.1
                if index == batch - 1 { text += "Connection: close\r\n" }
                _ = SocketClient.sendAll(fd, Array((text + "\r\n").utf8))
                sent.append(request.0)
              }
              let rest = SocketClient.readToEnd(fd)
              let answers = SocketClient.responses(in: received + rest)
              close(fd)
              if answers.count != sent.count {
                let connection = fd < 0 ? "connect failed, errno \(connectError)" : "connected"
                failures.append(
                  "round \(round): \(answers.count) answers to \(sent.count) (\(connection), "
                    + "\(received.count + rest.count) bytes read)")
              }
              for (request, answer) in zip(sent, answers) {
                if let failure = shared.seen.withLock({
                  Self.check(answer, for: request, seen: &$0)
                }) {
                  failures.append("client \(client) round \(round): \(failure)")
                }
                if let etag = answer.head.value("etag") { own[request.formatKey] = etag }
              }
            }
            return failures
          }
        }
      }
      return await group.reduce(into: []) { $0 += $1 }
    }
    let totals = shared.seen.withLock { $0 }
    #expect(failures.isEmpty, "seed \(seed): \(failures.prefix(10))")
    #expect(totals.answers > 300)
    // Repeats of a key with nothing changed between them come from the loops' tables.
    #expect(totals.memoryHits > 40, "\(totals.memoryHits) memory hits")
    #expect(versions.newest > 5)
  }

  /// Bytes read from `fd` until, with `before`, they hold `count` whole responses.
  static func read(_ fd: Int32, until count: Int, after before: [UInt8]) -> [UInt8] {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while SocketClient.responses(in: before + bytes).count < count {
      let n = Glibc.read(fd, &buffer, buffer.count)
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { break }
      bytes += buffer[0..<n]
    }
    return bytes
  }

  /// A random request of `client`'s: its parameters and the header lines that go with them.
  /// Each client keeps one `Accept` and one `X-Thumbd-Client` (or none), as a browser tab
  /// does, so a key comes again often enough for the loops' tables to answer it; the clients
  /// differ, so a table that confused their keys would answer one with another's variant.
  static func request(
    _ random: inout SeededRandom, client: Int, known: Int, own: [String: String],
    etags: [String]
  ) -> (Sent, String) {
    let formats: [String?] = [nil, nil, "png", "webp"]
    let accepts: [String?] = [nil, "image/webp,*/*", "image/avif,image/webp,image/*;q=0.8"]
    let accept = accepts[client % accepts.count]
    var sent = Sent(
      size: random.next() % 2 == 0 ? 16 : 24,  // both below the 32 px source
      format: formats[Int(random.next() % UInt64(formats.count))],
      acceptsWebP: accept?.contains("image/webp") ?? false,
      acceptsAVIF: accept?.contains("image/avif") ?? false, etag: nil, known: known)
    var lines = ""
    if let accept { lines += "Accept: \(accept)\r\n" }
    if client % 2 == 0 { lines += "X-Thumbd-Client: gallery\r\n" }
    // Not part of the key: any value finds the same entry.
    lines += "User-Agent: test-\(random.next() % 4)\r\n"
    if random.next() % 3 == 0 {
      // Mostly the ETag this client last got for the same request, as a browser revalidates;
      // sometimes any ETag seen (another size, format or version), which must not match.
      let etag =
        random.next() % 4 != 0 || etags.isEmpty
        ? own[sent.formatKey] : etags[Int(random.next() % UInt64(etags.count))]
      if let etag {
        sent.etag = etag
        lines += "If-None-Match: \(etag)\r\n"
      }
    }
    return (sent, lines)
  }

  /// What is wrong with `answer` to `request`, if anything; notes what it shows in `seen`.
  static func check(
    _ answer: (head: ResponseHead, body: [UInt8]), for request: Sent, seen: inout Seen
  ) -> String? {
    seen.answers += 1
    if answer.head.value("x-thumbd-cache") == "memory" { seen.memoryHits += 1 }
    switch answer.head.status {
    case 200:
      let version = FreshnessTests.Versions.version(answer)
      guard version >= request.known else {
        return "version \(version) after \(request.known) was in place"
      }
      guard let type = answer.head.value("content-type"), request.allows(type),
        let etag = answer.head.value("etag")
      else { return "\(answer.head.value("content-type") ?? "no type") for \(request)" }
      if let first = seen.types[request.formatKey], first != type {
        return "\(type) after \(first) for \(request.formatKey)"
      }
      seen.types[request.formatKey] = type
      if let known = seen.etags[etag],
        known.size != request.size || known.type != type || known.version != version
      {
        return "ETag \(etag) named \(known) and now \(request.size) \(type) \(version)"
      }
      seen.etags[etag] = (request.size, type, version)
      if etag == request.etag { return "200 for the ETag the client sent" }
      return nil
    case 304:
      guard let etag = request.etag, let known = seen.etags[etag] else {
        return "304 without an ETag sent"
      }
      guard known.size == request.size, request.allows(known.type),
        known.version >= request.known
      else { return "304 for \(known) to \(request)" }
      return nil
    default:
      return "status \(answer.head.status) for \(request)"
    }
  }
}
