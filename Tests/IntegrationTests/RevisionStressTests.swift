import Foundation
import Synchronization
import Testing
import ThumbClient
import ThumbSystem

@testable import Loopback
@testable import TestSupport

/// Revisions end to end, under concurrency, through the real daemon: a loopback origin whose
/// items change while sessions with recycled slots and HTTP clients ask for them with `rev`.
/// The origin changes an item first; the clients' model bumps its `rev` after, so a load that
/// names revision R was sent after the origin held R. Every picture shows its item and its
/// revision in its colour, and none may show a revision older than the one its load named.
/// (A load for R+1 used to join a download begun for R, before the change: 89 of 511
/// deliveries were older.)
@Suite("Revisions under concurrency", .serialized)
struct RevisionStressTests {
  static let items = 4

  /// Item and revision as a colour, exact through a PNG thumbnail of a solid picture.
  static func colour(item: Int, revision: Int) -> (UInt8, UInt8, UInt8) {
    (UInt8(item * 50 + 10), UInt8(revision % 256), UInt8(revision / 256 * 40 + 20))
  }

  static func shown(_ data: [UInt8]) -> (item: Int, revision: Int)? {
    guard let (r, g, b) = Pictures.centre(of: data), r >= 10, (Int(r) - 10) % 50 == 0 else {
      return nil
    }
    return ((Int(r) - 10) / 50, Int(g) + (Int(b) - 20) / 40 * 256)
  }

  /// The origin: each item's current revision, its picture, an ETag naming both, a long
  /// max-age (only `rev` makes the daemon ask again), 304 for a matching If-None-Match, and a
  /// pseudo-random delay so that downloads overlap changes.
  final class ChangingItems: Sendable {
    final class State: Sendable {
      let revisions = Mutex([Int](repeating: 0, count: RevisionStressTests.items))
      let pictures = Mutex([String: [UInt8]]())
    }
    let state = State()
    let origin: LoopbackOrigin

    init() throws {
      let state = self.state
      origin = try LoopbackOrigin.answering { request in
        let parts = request.path.split(separator: "/")
        guard parts.count == 2, let item = Int(parts[1].dropLast(4)),
          item < RevisionStressTests.items
        else { return .init(status: 404) }
        let revision = state.revisions.withLock { $0[item] }
        let tag = "\"\(item)-\(revision)\""
        let delay = UInt32((request.index * 7919 + item * 104_729) % 20_000)
        if request.headers["if-none-match"] == tag {
          return .init(status: 304, headers: ["ETag": tag, "Cache-Control": "max-age=3600"])
        }
        let body = state.pictures.withLock { cache in
          if let known = cache[tag] { return known }
          let made = Pictures.solid(
            RevisionStressTests.colour(item: item, revision: revision), size: 24)
          cache[tag] = made
          return made
        }
        return .init(
          headers: ["ETag": tag, "Cache-Control": "max-age=3600"], body: body,
          delayMicroseconds: delay)
      }.start()
    }

    func url(_ item: Int) -> String { origin.url("/item/\(item).png") }

    /// The origin takes the next revision of `item`.
    func change(_ item: Int) -> Int {
      state.revisions.withLock {
        $0[item] += 1
        return $0[item]
      }
    }
  }

  @Test(
    "sessions and HTTP clients with concurrent revs never see an older revision or another item",
    arguments: [20_261_202, 7, 424_242])
  func revisionsUnderConcurrency(seed: UInt64) async throws {
    let items = try ChangingItems()
    defer { items.origin.stop() }
    let daemon = try await TestDaemon.start(["--allow-private"])
    defer { daemon.stop() }
    let clients = try (0..<2).map { _ in try ThumbClient(endpoint: .unix(daemon.socket)) }
    let logs = clients.map { SessionTests.EventLog($0) }
    // What each load named: client, slot and token to (item, revision).
    var asked: [String: (item: Int, revision: Int)] = [:]
    var model = [Int](repeating: 0, count: Self.items)
    var generator = SeededRandom(seed: seed)
    let slots = 8
    var tokens = [[Int]](repeating: [Int](repeating: 0, count: slots), count: clients.count)
    var changes = 0

    // HTTP clients beside the sessions: each asks with the revision the model holds then.
    final class Shared: Sendable {
      let model = Mutex([Int](repeating: 0, count: RevisionStressTests.items))
      let failures = Mutex<[String]>([])
    }
    let shared = Shared()
    let socket = daemon.socket
    let urls = (0..<Self.items).map(items.url)
    // Blocking socket calls: each lane on a thread of its own, never on the cooperative pool
    // (three blocked pool threads starved every other suite running beside this one).
    let httpClients = (0..<3).map { lane in
      Task {
        try await offPool {
          var random = SeededRandom(seed: seed &+ UInt64(lane) &* 977)
          var served = 0
          for _ in 0..<60 {
            let item = Int.random(in: 0..<Self.items, using: &random)
            let revision = shared.model.withLock { $0[item] }
            let target =
              "/v1/thumbnail?url="
              + urls[item].addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
              + "&w=12&h=12&format=png&rev=r\(revision)"
            let answer = SocketClient.get(socket, target)
            guard answer.status == 200 else { continue }
            served += 1
            let body = SocketClient.body(of: answer.response)
            guard let seen = Self.shown(body), seen.item == item, seen.revision >= revision else {
              shared.failures.withLock {
                $0.append(
                  "item \(item) rev \(revision): shown \(String(describing: Self.shown(body)))")
              }
              continue
            }
          }
          return served
        }
      }
    }

    for step in 0..<1200 {
      if Int.random(in: 0..<7, using: &generator) == 0 {
        // The origin changes first, then the model learns the new revision.
        let item = Int.random(in: 0..<Self.items, using: &generator)
        model[item] = items.change(item)
        shared.model.withLock { [model] in $0 = model }
        changes += 1
      }
      let client = step % clients.count
      let slot = Int.random(in: 0..<slots, using: &generator)
      let item = Int.random(in: 0..<Self.items, using: &generator)
      tokens[client][slot] += 1
      let token = tokens[client][slot]
      asked["\(client)/\(slot)/\(token)"] = (item, model[item])
      try clients[client].load(
        slot: slot, item: "item-\(item)", token: token, url: items.url(item), width: 16,
        height: 16, format: .png, rev: "r\(model[item])")
      // Pacing, not waiting: loads spread over the downloads in flight.
      if step % 4 == 3 { try await Task.sleep(for: .milliseconds(2)) }
    }
    #expect(changes >= 120)
    // Every slot's last load is delivered.
    await eventually("final loads delivered") {
      (0..<clients.count).allSatisfy { client in
        let delivered = Set(logs[client].images.map { "\($0.slot)/\($0.token)" })
        return (0..<slots).allSatisfy { delivered.contains("\($0)/\(tokens[client][$0])") }
      }
    }
    var served = 0
    for task in httpClients { served += try await task.value }
    for client in clients { client.close() }
    for log in logs { await log.finished() }
    var delivered = 0
    var older: [String] = []
    var wrongItem = 0
    for (client, log) in logs.enumerated() {
      for image in log.images {
        delivered += 1
        guard let load = asked["\(client)/\(image.slot)/\(image.token)"],
          let seen = Self.shown(image.data)
        else {
          wrongItem += 1
          continue
        }
        if seen.item != load.item || image.item != "item-\(load.item)" { wrongItem += 1 }
        if seen.revision < load.revision {
          older.append("item \(load.item): asked r\(load.revision), shown r\(seen.revision)")
        }
      }
    }
    #expect(delivered >= 100, "only \(delivered) images delivered")
    #expect(served >= 100, "only \(served) HTTP answers")
    #expect(wrongItem == 0, "\(wrongItem) images of another item")
    #expect(older.isEmpty, "\(older.count) of \(delivered) older than asked: \(older.prefix(5))")
    let failures = shared.failures.withLock { $0 }
    #expect(failures.isEmpty, "HTTP: \(failures.count) older or wrong: \(failures.prefix(5))")
  }
}
