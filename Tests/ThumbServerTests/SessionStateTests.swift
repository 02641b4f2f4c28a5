import ImagePipeline
import Synchronization
import Testing
import ThumbProtocol
import ThumbSystem

@testable import LoadHarness
@testable import TestSupport
@testable import ThumbServer

/// `SessionState` without sockets or a pipeline: messages in, effects out; outcomes in,
/// messages or drops out.
@Suite struct SessionStateTests {
  static let box = ClientMessage.Box(width: 64, height: 64)

  static func load(_ slot: Int, _ item: String, _ token: Int) -> ClientMessage {
    .load(.init(slot: slot, item: item, token: token, url: "http://o/\(item)", box: box))
  }

  static func image(for item: String) -> SessionState.Outcome {
    let thumbnail = Thumbnail(
      data: Array(item.utf8), format: .jpeg, width: 8, height: 8, hasAlpha: false,
      sourceWidth: 8, sourceHeight: 8, orientation: 1)
    return .success(ImageResponse(thumbnail: thumbnail, source: .miss))
  }

  static let failure = SessionState.Outcome.failure(.queueFull)

  func makeState(memory: SessionMemory = SessionMemory()) -> SessionState {
    SessionState(parameters: ThumbnailParameters(), memory: memory)
  }

  /// The work a start effect names, with its purpose.
  func started(_ effects: [SessionState.Effect]) -> [(SessionState.WorkID, SessionState.Purpose)] {
    effects.compactMap {
      if case .start(let work, _, _, let purpose, _) = $0 { return (work, purpose) }
      return nil
    }
  }

  func cancelled(_ effects: [SessionState.Effect]) -> [SessionState.WorkID] {
    effects.compactMap {
      if case .cancel(let work) = $0 { return work }
      return nil
    }
  }

  func sent(_ effects: [SessionState.Effect]) -> [ServerMessage] {
    effects.compactMap {
      if case .send(let message) = $0 { return message }
      return nil
    }
  }

  func drops(_ effects: [SessionState.Effect]) -> Int {
    effects.count {
      if case .staleDrop = $0 { return true }
      return false
    }
  }

  @Test("a load starts visible work for its slot, and its result goes out with item and token")
  func loadAndDeliver() throws {
    var state = makeState()
    let effects = state.apply(Self.load(3, "a", 7))
    let (work, purpose) = try #require(started(effects).first)
    #expect(purpose == .load(slot: 3))
    guard case .start(_, let request, let priority, _, _) = effects[0] else {
      Issue.record("no start")
      return
    }
    #expect(request.url == "http://o/a" && priority == .visible)
    #expect(state.pendingWork == 1)
    let reply = sent(state.finished(work, purpose, Self.image(for: "a")))
    guard case .image(let image) = try #require(reply.first) else {
      Issue.record("not an image: \(reply)")
      return
    }
    #expect(image.slot == 3 && image.item == "a" && image.token == 7)
    #expect(image.data == Array("a".utf8))
    #expect(state.pendingWork == 0)
    // A second outcome for the answered binding is not sent again.
    #expect(drops(state.finished(work, purpose, Self.image(for: "a"))) == 1)
  }

  @Test(
    "a placeholder goes out for the load it was found for, before its image, and never for a binding that moved on or after the image"
  )
  func placeholderRule() throws {
    var state = makeState()
    let effects = state.apply(Self.load(0, "a", 1))
    let (first, purpose) = try #require(started(effects).first)
    let lookups = effects.compactMap { effect -> SessionState.WorkID? in
      if case .findPlaceholder(let work, _, _) = effect { return work }
      return nil
    }
    #expect(lookups == [first], "every load looks for its placeholder")
    let look = SessionState.Outcome.placeholder(
      thumbHash: [1, 2, 3], colour: "#102030", width: 40, height: 30)
    let early = sent(state.finished(first, purpose, look))
    guard case .placeholder(let frame) = try #require(early.first) else {
      Issue.record("no placeholder: \(early)")
      return
    }
    #expect(frame.slot == 0 && frame.item == "a" && frame.token == 1 && frame.width == 40)
    #expect(state.pendingWork == 1, "the load is still waiting for its image")
    // The slot moves on: the old load's placeholder (a disk lookup finishing late) is dropped.
    let second = try #require(started(state.apply(Self.load(0, "b", 2))).first).0
    #expect(sent(state.finished(first, purpose, look)).isEmpty)
    // The image comes first: a placeholder after it is never sent.
    #expect(sent(state.finished(second, purpose, Self.image(for: "b"))).count == 1)
    #expect(sent(state.finished(second, purpose, look)).isEmpty)
    #expect(state.pendingWork == 0)
  }

  @Test(
    "a preview goes out once, for the load that asked, before its image; never for a binding that moved on, twice, or after the image"
  )
  func previewRule() throws {
    var state = makeState()
    let asking = ClientMessage.load(
      .init(slot: 0, item: "a", token: 1, url: "http://o/a", box: Self.box, preview: true))
    let effects = state.apply(asking)
    let previews = effects.compactMap { effect -> Bool? in
      if case .start(_, _, _, _, let preview) = effect { return preview }
      return nil
    }
    #expect(previews == [true], "the work is asked for a preview")
    let (first, purpose) = try #require(started(effects).first)
    let thumbnail = Thumbnail(
      data: [1, 2, 3], format: .jpeg, width: 6, height: 4, hasAlpha: false, sourceWidth: 60,
      sourceHeight: 40, orientation: 1)
    let early = sent(state.finished(first, purpose, .preview(thumbnail)))
    guard case .preview(let frame) = try #require(early.first) else {
      Issue.record("no preview: \(early)")
      return
    }
    #expect(frame.slot == 0 && frame.item == "a" && frame.token == 1 && frame.width == 6)
    #expect(frame.data == [1, 2, 3] && frame.cache == "")
    #expect(state.pendingWork == 1, "the load still waits for its image")
    #expect(sent(state.finished(first, purpose, .preview(thumbnail))).isEmpty, "only one")
    // The slot moves on: a late preview of the old load is dropped.
    let second = try #require(started(state.apply(Self.load(0, "b", 2))).first).0
    #expect(sent(state.finished(first, purpose, .preview(thumbnail))).isEmpty)
    // A load that did not ask is not asked for one; after the image none is sent anyway.
    #expect(sent(state.finished(second, purpose, Self.image(for: "b"))).count == 1)
    #expect(sent(state.finished(second, purpose, .preview(thumbnail))).isEmpty)
    #expect(state.pendingWork == 0)
  }

  @Test("reusing a slot cancels the old load, and the old load's late result is dropped")
  func reuseDropsOld() throws {
    var state = makeState()
    let (first, purpose) = try #require(started(state.apply(Self.load(0, "a", 1))).first)
    let effects = state.apply(Self.load(0, "b", 2))
    #expect(cancelled(effects) == [first])
    let (second, _) = try #require(started(effects).first)
    #expect(second != first)
    // The old load's result was in flight when it was cancelled.
    let late = state.finished(first, purpose, Self.image(for: "a"))
    #expect(sent(late).isEmpty && drops(late) == 1)
    // Even the same item and token again is a new binding: the older work never passes.
    let third = try #require(started(state.apply(Self.load(0, "b", 2))).first).0
    #expect(drops(state.finished(second, purpose, Self.image(for: "b"))) == 1)
    #expect(sent(state.finished(third, purpose, Self.image(for: "b"))).count == 1)
  }

  @Test("cancel and priority act only with the slot's token; a failure goes out as an error")
  func tokens() throws {
    var state = makeState()
    let (work, purpose) = try #require(started(state.apply(Self.load(1, "a", 5))).first)
    #expect(state.apply(.cancel(slot: 1, token: 4)).isEmpty)
    #expect(state.apply(.priority(slot: 1, token: 4, priority: .prefetch)).isEmpty)
    let raised = state.apply(.priority(slot: 1, token: 5, priority: .normal))
    guard case .setPriority(work, .normal) = try #require(raised.first) else {
      Issue.record("no priority change: \(raised)")
      return
    }
    let reply = sent(state.finished(work, purpose, Self.failure))
    #expect(
      reply == [
        .error(
          slot: 1, item: "a", token: 5, code: "queue_full",
          message: PipelineError.queueFull.message)
      ])
    // Cancelled with its token: nothing is sent afterwards.
    let (next, _) = try #require(started(state.apply(Self.load(1, "b", 6))).first)
    #expect(cancelled(state.apply(.cancel(slot: 1, token: 6))) == [next])
    #expect(sent(state.finished(next, purpose, Self.image(for: "b"))).isEmpty)
  }

  @Test("a box the parameters refuse is answered invalid_spec at once, and nothing starts")
  func invalidBox() throws {
    var state = makeState()
    let load = ClientMessage.load(
      .init(
        slot: 2, item: "x", token: 1, url: "http://o/x",
        box: .init(width: -1, height: 10, scale: nil, fit: nil, format: nil, quality: nil)))
    let effects = state.apply(load)
    #expect(started(effects).isEmpty)
    guard case .error(2, "x", 1, let code, _) = try #require(sent(effects).first) else {
      Issue.record("no error: \(effects)")
      return
    }
    #expect(code == Wire.Code.invalidSpec)
    #expect(state.pendingWork == 0)
  }

  @Test("prefetch starts 32 items at a time, refills as they finish, and release cancels the rest")
  func prefetchQueue() throws {
    var state = makeState()
    let items = (0..<40).map { ClientMessage.PrefetchItem(item: "p\($0)", url: "http://o/p\($0)") }
    let effects = state.apply(.prefetch(.init(round: 9, items: items, box: Self.box)))
    let first = started(effects)
    #expect(first.count == SessionState.maxStartedPrefetches)
    #expect(first.map(\.1) == (0..<32).map { .prefetch(round: 9, item: "p\($0)") })
    // One finishes: the 33rd starts, and the round hears of it.
    let done = state.finished(first[0].0, first[0].1, Self.image(for: "p0"))
    #expect(started(done).map(\.1) == [.prefetch(round: 9, item: "p32")])
    #expect(sent(done) == [.prefetched(round: 9, item: "p0")])
    // The same round number cannot open twice: that message alone is answered, with no
    // slot, and the open round goes on.
    let again = state.apply(.prefetch(.init(round: 9, items: items, box: Self.box)))
    guard case .error(nil, nil, nil, Wire.Code.badMessage, let message)? = sent(again).first,
      again.count == 1
    else {
      Issue.record("not one bad_message: \(again)")
      return
    }
    #expect(message.contains("round 9"))
    // Release: the 32 running are cancelled, newest first; the 7 queued never start.
    let released = state.apply(.release(round: 9))
    #expect(cancelled(released).count == 32)
    #expect(cancelled(released) == cancelled(released).sorted(by: >))
    #expect(started(released).isEmpty && state.pendingWork == 0)
    // A released item's late outcome is not sent.
    #expect(state.finished(first[1].0, first[1].1, Self.image(for: "p1")).isEmpty)
  }

  @Test("announced items past the session's memory are refused busy, and close gives it all back")
  func prefetchMemory() throws {
    let memory = SessionMemory(limit: 4096, perSession: 4096)
    var state = makeState(memory: memory)
    let items = (0..<40).map { ClientMessage.PrefetchItem(item: "p\($0)", url: "http://o/p\($0)") }
    let effects = state.apply(.prefetch(.init(round: 1, items: items, box: Self.box)))
    let busy = sent(effects).filter {
      if case .prefetchError(1, _, Wire.Code.busy) = $0 { return true }
      return false
    }
    #expect(!busy.isEmpty && busy.count + started(effects).count == 40)
    #expect(memory.used > 0 && memory.used <= 4096)
    _ = state.close()
    #expect(memory.used == 0)
  }

  @Test("a round past the open-round bound has its items answered busy; the others go on")
  func roundBound() throws {
    var state = makeState()
    let one = [ClientMessage.PrefetchItem(item: "p", url: "http://o/p")]
    for round in 0..<Wire.maxOpenRounds {
      _ = state.apply(.prefetch(.init(round: round, items: one, box: Self.box)))
    }
    let pending = state.pendingWork
    let two = one + [ClientMessage.PrefetchItem(item: "q", url: "http://o/q")]
    let over = state.apply(.prefetch(.init(round: Wire.maxOpenRounds, items: two, box: Self.box)))
    #expect(
      sent(over) == [
        .prefetchError(round: Wire.maxOpenRounds, item: "p", code: Wire.Code.busy),
        .prefetchError(round: Wire.maxOpenRounds, item: "q", code: Wire.Code.busy),
      ])
    #expect(started(over).isEmpty && state.pendingWork == pending)
  }

  @Test("a refused load moves its slot on: the old load is cancelled and only the error is sent")
  func refusedLoad() throws {
    var state = makeState()
    let first = try #require(started(state.apply(Self.load(0, "a", 1))).first)
    let refused = state.refuse(
      RefusedMessage(op: "load", slot: 0, item: "b", token: 2), because: "rev must be a string")
    #expect(cancelled(refused) == [first.0])
    #expect(
      sent(refused) == [
        .error(
          slot: 0, item: "b", token: 2, code: Wire.Code.badMessage,
          message: "rev must be a string")
      ])
    // The old load's late image is a stale drop, not a delivery.
    #expect(sent(state.finished(first.0, first.1, Self.image(for: "a"))).isEmpty)
    // A refused priority or cancel changes nothing.
    let second = try #require(started(state.apply(Self.load(1, "c", 1))).first)
    let priority = state.refuse(
      RefusedMessage(op: "priority", slot: 1, token: 1), because: "priority must be visible")
    #expect(cancelled(priority).isEmpty && state.pendingWork == 1)
    #expect(sent(state.finished(second.0, second.1, Self.image(for: "c"))).count == 1)
  }

  /// Random loads, cancels and outcomes over a few reused slots, outcomes arriving in any
  /// order and for cancelled work too (a result already on its way when the slot moved on):
  /// every image sent is for the binding its slot holds at that moment, from the work started
  /// for that binding, at most once; every other outcome is a drop.
  @Test(
    "randomised slot reuse: only the current binding's own work is ever delivered", arguments: 1...8
  )
  func slotReuseProperty(seed: UInt64) throws {
    var random = SeededRandom(seed: seed)
    var state = makeState()
    struct Bound: Equatable {
      let item: String
      let token: Int
      let work: SessionState.WorkID
      var answered = false
    }
    var model: [Int: Bound] = [:]
    var outstanding: [(SessionState.WorkID, SessionState.Purpose, String)] = []
    var nextToken = 0
    var delivered = 0
    for step in 0..<600 {
      let slot = Int(random.next() % 5)
      switch random.next() % 10 {
      case 0..<4:
        nextToken += 1
        let item = "i\(random.next() % 12)"
        let effects = state.apply(Self.load(slot, item, nextToken))
        if let old = model[slot], !old.answered { #expect(cancelled(effects) == [old.work]) }
        let (work, purpose) = try #require(started(effects).first)
        model[slot] = Bound(item: item, token: nextToken, work: work)
        outstanding.append((work, purpose, item))
      case 4:
        let token = model[slot].map { random.next() % 2 == 0 ? $0.token : $0.token + 1 } ?? 0
        _ = state.apply(.cancel(slot: slot, token: token))
        if model[slot]?.token == token { model[slot] = nil }
      default:
        guard !outstanding.isEmpty else { continue }
        let (work, purpose, item) = outstanding.remove(
          at: Int(random.next() % UInt64(outstanding.count)))
        guard case .load(let target) = purpose else { continue }
        let effects = state.finished(work, purpose, Self.image(for: item))
        let current = model[target]
        if let current, current.work == work, !current.answered {
          guard case .image(let image) = try #require(sent(effects).first, "step \(step)") else {
            Issue.record("step \(step): \(effects)")
            return
          }
          #expect(image.slot == target && image.item == current.item)
          #expect(image.token == current.token && image.data == Array(item.utf8))
          model[target]!.answered = true
          delivered += 1
        } else {
          #expect(sent(effects).isEmpty && drops(effects) == 1, "step \(step)")
        }
      }
    }
    #expect(delivered > 20, "the history delivered too little to test anything")
  }
}

extension SessionStateTests {
  @Test(
    "randomised revisions: a slot that asked for a newer rev never gets an older rev's picture, even under the same token",
    arguments: 1...4)
  func revisionProperty(seed: UInt64) throws {
    var random = SeededRandom(seed: seed)
    var state = makeState()
    var newest: [Int: String] = [:]
    var tokens: [Int: Int] = [:]
    var outstanding: [(SessionState.WorkID, SessionState.Purpose, String)] = []
    var reuses = 0
    var delivered = 0
    var revision = 0
    for step in 0..<4000 {
      let slot = Int(random.next() % 4)
      if random.next() % 2 == 0 {
        // The same item, a newer rev; half of the time the client even keeps the token.
        revision += 1
        let rev = "r\(revision)"
        let token = random.next() % 2 == 0 ? (tokens[slot] ?? 0) : revision
        if newest[slot] != nil { reuses += 1 }
        let effects = state.apply(
          .load(
            .init(
              slot: slot, item: "item-\(slot)", token: token, url: "http://o/\(slot)",
              box: Self.box,
              rev: rev)))
        for effect in effects {
          if case .start(let work, let request, _, let purpose, _) = effect {
            #expect(request.rev == rev)
            outstanding.append((work, purpose, rev))
          }
        }
        newest[slot] = rev
        tokens[slot] = token
      } else if !outstanding.isEmpty {
        let (work, purpose, rev) = outstanding.remove(
          at: Int(random.next() % UInt64(outstanding.count)))
        guard case .load(let target) = purpose else { continue }
        for message in sent(state.finished(work, purpose, Self.image(for: rev))) {
          guard case .image(let image) = message else { continue }
          #expect(
            image.rev == newest[target],
            "step \(step): rev \(rev) delivered over \(newest[target] ?? "-")")
          #expect(image.data == Array((newest[target] ?? "").utf8), "step \(step)")
          delivered += 1
        }
      }
    }
    #expect(reuses >= 1000 && delivered > 50, "\(reuses) reuses, \(delivered) deliveries")
  }
}

/// thumbload's library target and the daemon's session give the same delivery decisions for
/// the same history: both are the same `SessionState`, reached one through `LibraryClient`'s
/// calls, the other through frames on the wire (`SessionStream`, the session handler's
/// logic) read back as a daemon client reads them.
@Suite struct SessionTargetParityTests {
  /// Work that finishes only when the history says so.
  final class ScriptedWork: SessionWork {
    let report: @Sendable (FinishedWork) -> Void
    var started: [(SessionState.WorkID, SessionState.Purpose, String)] = []

    init(report: @escaping @Sendable (FinishedWork) -> Void) { self.report = report }

    func start(
      _ work: SessionState.WorkID, _ request: ImageRequest, _ priority: ImagePriority,
      _ purpose: SessionState.Purpose, preview: Bool
    ) -> SessionState.Outcome? {
      started.append((work, purpose, request.url))
      return nil
    }
    func placeholder(
      _ work: SessionState.WorkID, _ request: ImageRequest, _ purpose: SessionState.Purpose
    ) -> SessionState.Outcome? { nil }
    func cancel(_ work: SessionState.WorkID) {}
    func setPriority(_ work: SessionState.WorkID, _ priority: ImagePriority) {}
    func forget(_ work: SessionState.WorkID) {}
    func countStaleDrop() {}

    /// Finishes the `index`th started work that has not finished (cancelled work too).
    func finish(_ index: Int, fail: Bool) -> FinishedWork? {
      guard !started.isEmpty else { return nil }
      let (work, purpose, url) = started.remove(at: index % started.count)
      return FinishedWork(
        work: work, purpose: purpose,
        outcome: fail ? SessionStateTests.failure : SessionStateTests.image(for: url))
    }
  }

  enum Step {
    case load(slot: Int, item: String, token: Int)
    case cancel(slot: Int, token: Int)
    case prefetch(round: Int, items: [String])
    case release(round: Int)
    case finish(Int, fail: Bool)
  }

  static func history(seed: UInt64) -> [Step] {
    var random = SeededRandom(seed: seed)
    var token = 0
    var round = 0
    // Valid messages only (tokens and rounds are never negative): a frame the daemon refuses
    // closes its session, which the library has no wire to do.
    return (0..<600).map { _ in
      switch random.next() % 16 {
      case 0..<5:
        token += 1
        return .load(slot: Int(random.next() % 6), item: "i\(random.next() % 20)", token: token)
      case 5:
        return .cancel(slot: Int(random.next() % 6), token: max(0, token - Int(random.next() % 3)))
      case 6:
        round += 1
        return .prefetch(
          round: round, items: (0...Int(random.next() % 12)).map { "p\(round)-\($0)" })
      case 7: return .release(round: max(0, round - Int(random.next() % 2)))
      default: return .finish(Int(random.next() % 1000), fail: random.next() % 7 == 0)
      }
    }
  }

  static func message(_ step: Step) -> ClientMessage? {
    let box = SessionStateTests.box
    switch step {
    case .load(let slot, let item, let token):
      return .load(.init(slot: slot, item: item, token: token, url: "http://o/\(item)", box: box))
    case .cancel(let slot, let token): return .cancel(slot: slot, token: token)
    case .prefetch(let round, let items):
      return .prefetch(
        .init(round: round, items: items.map { .init(item: $0, url: "http://o/\($0)") }, box: box))
    case .release(let round): return .release(round: round)
    case .finish: return nil
    }
  }

  /// The library target's events for a history.
  func library(_ history: [Step]) async throws -> [TargetEvent] {
    var made: ScriptedWork?
    let client = LibraryClient { report in
      let scripted = ScriptedWork(report: report)
      made = scripted
      return SessionDriver(
        state: SessionState(parameters: ThumbnailParameters(), memory: SessionMemory()),
        work: scripted)
    }
    let work = try #require(made)
    for step in history {
      switch step {
      case .load(let slot, let item, let token):
        try client.load(
          slot: slot, item: item, token: token, url: "http://o/\(item)", size: 64, visible: true,
          preview: false)
      case .cancel(let slot, let token): try client.cancel(slot: slot, token: token)
      case .prefetch(let round, let items):
        try client.prefetch(
          round: round, items: items.map { ($0, "http://o/\($0)") }, size: 64)
      case .release(let round): try client.release(round: round)
      case .finish(let index, let fail):
        if let done = work.finish(index, fail: fail) { work.report(done) }
      }
    }
    client.close()
    var events: [TargetEvent] = []
    for await event in client.events { events.append(event) }
    return events
  }

  /// The daemon session's events for a history: client frames in as bytes, the bytes it
  /// writes read back by a client's frame reader.
  func daemon(_ history: [Step]) throws -> [TargetEvent] {
    let pending = Mutex<[FinishedWork]>([])
    let work = ScriptedWork { done in pending.withLock { $0.append(done) } }
    var stream = SessionStream(
      driver: SessionDriver(
        state: SessionState(parameters: ThumbnailParameters(), memory: SessionMemory()),
        work: work))
    var written: [UInt8] = []
    for step in history {
      if let message = Self.message(step) {
        // A byte at a time: the frame reader must not change what the session decides.
        for byte in message.frame.serialized() {
          switch stream.receive([byte][...]) {
          case .frames(_, let output): written += output
          case .failed(let error, _): Issue.record("bad frame: \(error)")
          }
        }
      } else if case .finish(let index, let fail) = step, let done = work.finish(index, fail: fail)
      {
        work.report(done)
        for done in pending.withLock({ list in
          defer { list.removeAll() }
          return list
        }) {
          written += stream.finished(done)
        }
      }
    }
    var reader = SessionFrameReader(maxBodyBytes: 1 << 20)
    return try reader.feed(written).map { TargetEvent(try #require(ServerMessage(frame: $0))) }
  }

  @Test(
    "library and daemon targets deliver the same events for the same seeded history",
    arguments: 1...6)
  func sameDecisions(seed: UInt64) async throws {
    let history = Self.history(seed: seed)
    let fromLibrary = try await library(history)
    let fromDaemon = try daemon(history)
    #expect(fromLibrary == fromDaemon)
    let images = fromLibrary.count {
      if case .image = $0 { return true }
      return false
    }
    #expect(images > 10 && fromLibrary.count > images, "the history exercised too little")
  }
}
