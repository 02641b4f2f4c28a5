import Foundation
import ImagePipeline
import Synchronization
import Testing
import ThumbClient
import ThumbProtocol
import ThumbSystem
import ThumbWire

@testable import Loopback
@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// Placeholders as fresh as images (issue 52): files rewritten in place, without `rev`, while
/// HTTP clients and a session ask for their placeholders and thumbnails through the real
/// daemon. Every version of a file has its own colour and turns the picture between landscape
/// and portrait, so each answer says which version it shows; none may show a version older
/// than the one in place when it was asked for.
@Suite("Placeholder freshness", .serialized, .onLane(.clients))
struct PlaceholderFreshnessTests {
  /// Version `v`'s colour is `palette[v % 8]`: far apart, so a ThumbHash's average names one.
  static let palette: [(Int, Int, Int)] = [
    (230, 20, 20), (20, 200, 20), (20, 20, 230), (240, 240, 20),
    (230, 20, 230), (20, 230, 230), (245, 245, 245), (15, 15, 15),
  ]

  /// Even versions are 48x24, odd ones 24x48.
  static func isLandscape(_ version: Int) -> Bool { version % 2 == 0 }

  static func picture(_ version: Int) -> [UInt8] {
    let (r, g, b) = palette[version % palette.count]
    let (width, height) = isLandscape(version) ? (48, 24) : (24, 48)
    let pixels = [UInt8]((0..<(width * height)).flatMap { _ in [UInt8(r), UInt8(g), UInt8(b)] })
    return try! ImageEncoder.png(Bitmap(pixels: pixels, width: width, height: height, channels: 3))
  }

  /// The files, how many rewrites of each have finished (a file's version: what is in place),
  /// and how many have begun (the newest a reader may see: a rewrite's bytes are readable
  /// before it is counted finished).
  final class Files: Sendable {
    let paths: [String]
    private let versions: Mutex<[Int]>
    private let begun: Mutex<[Int]>

    init(directory: String, count: Int) throws {
      paths = (0..<count).map { directory + "/source-\($0).png" }
      versions = Mutex([Int](repeating: 0, count: count))
      begun = Mutex([Int](repeating: 0, count: count))
      for path in paths {
        try Data(PlaceholderFreshnessTests.picture(0)).write(to: URL(fileURLWithPath: path))
      }
    }

    func version(_ file: Int) -> Int { versions.withLock { $0[file] } }

    /// The newest version of `file` any reader may have seen by now.
    func newestSeen(_ file: Int) -> Int { begun.withLock { $0[file] } }

    /// Rewrites `file` in place (truncated, then written: readers may see it half written)
    /// with its next version.
    func rewrite(_ file: Int) {
      let next = version(file) + 1
      let bytes = PlaceholderFreshnessTests.picture(next)
      begun.withLock { $0[file] = next }
      let fd = open(paths[file], O_WRONLY | O_TRUNC)
      precondition(fd >= 0)
      var written = 0
      while written < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
        precondition(n > 0)
        written += n
      }
      close(fd)
      versions.withLock { $0[file] = next }
    }
  }

  /// What one answer showed, checked against the version in place when it was asked for
  /// (`sent`) and the newest any reader could have seen when it came (`received`: a rewrite
  /// begun by then counts, since its bytes are on disk before it is counted finished).
  enum Check: Equatable {
    case fresh
    case older(shown: Int, sent: Int)
    /// Its colour is no version's, or its shape is not its colour's version's.
    case unrecognised(String)
    /// More than a palette's worth of versions went by while it was asked: not decided.
    case ambiguous
  }

  static func check(
    colour: (Int, Int, Int), landscape: Bool?, sent: Int, received: Int
  ) -> Check {
    func distance(_ a: (Int, Int, Int)) -> Int {
      abs(a.0 - colour.0) + abs(a.1 - colour.1) + abs(a.2 - colour.2)
    }
    let ranked = palette.indices.sorted { distance(palette[$0]) < distance(palette[$1]) }
    let residue = ranked[0]
    guard distance(palette[residue]) < 90, distance(palette[ranked[1]]) > 150 else {
      return .unrecognised("colour \(colour)")
    }
    if let landscape, landscape != isLandscape(residue) {
      return .unrecognised("colour \(colour) of version \(residue) in the other shape")
    }
    guard received - sent < palette.count else { return .ambiguous }
    let shown = received - ((received - residue) % palette.count + palette.count) % palette.count
    return shown >= sent ? .fresh : .older(shown: shown, sent: sent)
  }

  /// The average colour a ThumbHash carries in its header (its DC terms), 0...255.
  static func averageColour(ofThumbHash hash: [UInt8]) -> (Int, Int, Int)? {
    guard hash.count >= 5 else { return nil }
    let header = Int(hash[0]) | Int(hash[1]) << 8 | Int(hash[2]) << 16
    let l = Double(header & 63) / 63
    let p = Double(header >> 6 & 63) / 31.5 - 1
    let q = Double(header >> 12 & 63) / 31.5 - 1
    let b = l - 2 * p / 3
    let r = (3 * l - b + q) / 2
    let g = r - q
    func level(_ v: Double) -> Int { Int((max(0, min(1, v)) * 255).rounded()) }
    return (level(r), level(g), level(b))
  }

  /// Whether a ThumbHash says its picture is wider than tall.
  static func landscape(ofThumbHash hash: [UInt8]) -> Bool? {
    hash.count >= 5 ? hash[4] & 0x80 != 0 : nil
  }

  static func colour(ofHex text: String) -> (Int, Int, Int)? {
    guard text.count == 7, text.hasPrefix("#"), let value = Int(text.dropFirst(), radix: 16) else {
      return nil
    }
    return (value >> 16 & 255, value >> 8 & 255, value & 255)
  }

  /// The colour and shape of an encoded thumbnail: its centre pixel.
  static func shown(byThumbnail data: [UInt8]) -> ((Int, Int, Int), Bool)? {
    guard let bitmap = try? Thumbnailer().decodeFullResolution(.bytes(data)) else { return nil }
    let centre = ((bitmap.height / 2) * bitmap.width + bitmap.width / 2) * bitmap.channels
    let pixel = bitmap.pixels[centre..<centre + 3].map { Int($0) }
    return ((pixel[0], pixel[1], pixel[2]), bitmap.width > bitmap.height)
  }

  /// Counts per kind of answer: checked fresh, older, unrecognised, ambiguous, failed.
  final class Tally: Sendable {
    private let counts = Mutex<[String: [String: Int]]>([:])
    private let findings = Mutex<[String]>([])
    private let reasons = Mutex<[String: [String: Int]]>([:])

    func note(_ kind: String, _ check: Check, _ context: @autoclosure () -> String) {
      let outcome: String
      switch check {
      case .fresh: outcome = "fresh"
      case .older: outcome = "older"
      case .unrecognised: outcome = "unrecognised"
      case .ambiguous: outcome = "ambiguous"
      }
      counts.withLock { $0[kind, default: [:]][outcome, default: 0] += 1 }
      if outcome == "older" || outcome == "unrecognised" {
        findings.withLock { $0.append("\(kind): \(check) \(context())") }
      }
    }

    /// An answer that was an error, with what it said. The one error a rewrite explains is
    /// an empty file (caught between its truncation and its write): it is a problem unless a
    /// rewrite of the file was under way when it was asked for or began before it came.
    func failed(_ kind: String, _ reason: String, emptyInput: Bool, rewriting: Bool) {
      counts.withLock { $0[kind, default: [:]]["failed", default: 0] += 1 }
      reasons.withLock { $0[kind, default: [:]][reason, default: 0] += 1 }
      if !(emptyInput && rewriting) {
        findings.withLock { $0.append("\(kind): failed (\(reason)) with no rewrite to explain it") }
      }
    }

    /// The errors of one kind of answer, by what they said.
    func reasons(_ kind: String) -> [String: Int] { reasons.withLock { $0[kind] ?? [:] } }

    func count(_ kind: String, _ outcome: String) -> Int {
      counts.withLock { $0[kind]?[outcome] ?? 0 }
    }

    var summary: String { counts.withLock { "\($0)" } + reasons.withLock { " errors: \($0)" } }
    var problems: [String] { findings.withLock { $0 } }
  }

  @Test(
    "files rewritten in place, no rev, changing colour and aspect: no placeholder (session frame, /v1/placeholder, X-Thumbd-Placeholder) or image older than the file when asked"
  )
  func rewrittenInPlace() async throws {
    let directory = TestDaemon.makeDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let sourceDirectory = directory + "/sources"
    try FileManager.default.createDirectory(
      atPath: sourceDirectory, withIntermediateDirectories: true)
    let files = try Files(directory: sourceDirectory, count: 3)
    let daemon = try await TestDaemon.start(
      ["--file-root", sourceDirectory, "--allow-scheme", "file"], directory: directory)
    defer { daemon.stop() }
    let tally = Tally()
    let writing = Atomic<Bool>(true)
    // Rounds of the session and answers of the HTTP clients so far: the writer goes on until
    // each has had its share (a loaded machine runs them slower), within 240 s.
    let rounds = Atomic<Int>(0)
    let answers = Atomic<Int>(0)
    // Placeholder frames the session has had so far: they come only for loads that miss
    // memory while the file's look is known, so their number is counted, not assumed.
    let placeholders = Atomic<Int>(0)
    // Each file is rewritten every 45-120 ms: far more often than the coarse timestamp tick,
    // far less than a palette's worth of versions within one answer.
    let writer = StartedThread {
      var generator = SeededRandom(seed: 52_001)
      let started = ContinuousClock.now
      var writes = 0
      while writes < 120
        || ((rounds.load(ordering: .relaxed) < 40 || answers.load(ordering: .relaxed) < 400
          || placeholders.load(ordering: .relaxed) < 40)
          && started.duration(to: .now) < .seconds(240))
      {
        files.rewrite(Int.random(in: 0..<files.paths.count, using: &generator))
        writes += 1
        usleep(UInt32.random(in: 15_000...40_000, using: &generator))
      }
      writing.store(false, ordering: .sequentiallyConsistent)
    }

    // Two HTTP clients on threads of their own: placeholders (bare, boxed) and thumbnails
    // with the placeholder header.
    let clients = (0..<2).map { seed in
      StartedThread {
        var generator = SeededRandom(seed: UInt64(7 + seed))
        while writing.load(ordering: .sequentiallyConsistent) {
          let file = Int.random(in: 0..<files.paths.count, using: &generator)
          let url = PercentEncoding.encode("file://" + files.paths[file])
          let kind = Int.random(in: 0..<3, using: &generator)
          let sent = files.version(file)
          let target =
            kind == 2
            ? "/v1/thumbnail?w=20&h=20&format=png&placeholder=1&url=\(url)"
            : "/v1/placeholder?url=\(url)" + (kind == 1 ? "&w=20&h=20" : "")
          let answer = SocketClient.get(daemon.socket, target)
          let received = files.newestSeen(file)
          answers.add(1, ordering: .relaxed)
          let name = ["json", "json-boxed", "image"][kind]
          guard answer.status == 200 else {
            let body = String(decoding: SocketClient.body(of: answer.response), as: UTF8.self)
            tally.failed(
              name, "\(answer.status) \(body.prefix(100))",
              emptyInput: answer.status == 415 && body.contains("empty input"),
              rewriting: received > sent)
            continue
          }
          let body = SocketClient.body(of: answer.response)
          if kind == 2 {
            guard let (colour, landscape) = Self.shown(byThumbnail: body) else {
              tally.note("image", .unrecognised("no picture"), "")
              continue
            }
            tally.note(
              "image",
              Self.check(colour: colour, landscape: landscape, sent: sent, received: received),
              "file \(file) sent \(sent) received \(received)")
            if let header = SocketClient.header("X-Thumbd-Placeholder", in: answer.response),
              let hash = Base64.decodeStandard(header),
              let colour = Self.averageColour(ofThumbHash: hash)
            {
              tally.note(
                "header",
                Self.check(
                  colour: colour, landscape: Self.landscape(ofThumbHash: hash), sent: sent,
                  received: received), "file \(file) sent \(sent) received \(received)")
            } else {
              tally.failed("header", "no header", emptyInput: false, rewriting: false)
            }
            continue
          }
          guard let json = PlaceholderTests.json(body),
            let colour = (json["colour"] as? String).flatMap(Self.colour(ofHex:)),
            let width = json["width"] as? Int, let height = json["height"] as? Int
          else {
            tally.note(name, .unrecognised("no JSON"), String(decoding: body, as: UTF8.self))
            continue
          }
          // Bare: the source's size (48x24 or 24x48); boxed: the 20x20 thumbnail's (20x10, 10x20).
          tally.note(
            name,
            Self.check(colour: colour, landscape: width > height, sent: sent, received: received),
            "file \(file) sent \(sent) received \(received) \(width)x\(height)")
        }
      }
    }

    // A session: four recycled cells, loading random files at random sizes again as soon as
    // the round's images came. Every event is noted with the versions in place when it arrived.
    let client = try ThumbClient(endpoint: .unix(daemon.socket))
    let events = Recorder<(ThumbClient.Event, [Int])>()
    let consumer = Task {
      for await event in client.events {
        events.append((event, (0..<files.paths.count).map(files.newestSeen)))
        if case .placeholder = event { placeholders.add(1, ordering: .relaxed) }
      }
    }
    var generator = SeededRandom(seed: 52_052)
    var asked: [String: (file: Int, sent: Int)] = [:]
    var token = 0
    while writing.load(ordering: .sequentiallyConsistent) {
      let before = events.values.count
      var round: [String] = []
      for slot in 0..<4 {
        token += 1
        let file = Int.random(in: 0..<files.paths.count, using: &generator)
        asked["\(slot)/\(token)"] = (file, files.version(file))
        round.append("\(slot)/\(token)")
        // Many sizes: a load that misses memory while the file's look is known gets a
        // placeholder frame first.
        let side = Int.random(in: 10...40, using: &generator)
        try client.load(
          slot: slot, item: "file-\(file)", token: token, url: "file://" + files.paths[file],
          width: side, height: side, format: .png)
      }
      await eventually("the round's four images or errors") {
        let ended = events.values.dropFirst(before).compactMap { event -> String? in
          switch event.0 {
          case .image(let image): "\(image.slot)/\(image.token)"
          case .error(let slot?, _, let token?, _, _): "\(slot)/\(token)"
          default: nil
          }
        }
        return Set(round).isSubset(of: Set(ended))
      }
      rounds.add(1, ordering: .relaxed)
    }
    client.close()
    await consumer.value
    _ = try await writer.value
    for thread in clients { _ = try await thread.value }

    for (event, versions) in events.values {
      switch event {
      case .placeholder(let placeholder):
        guard let ask = asked["\(placeholder.slot)/\(placeholder.token)"],
          let colour = Self.colour(ofHex: placeholder.colour)
        else { continue }
        tally.note(
          "session-placeholder",
          Self.check(
            colour: colour, landscape: placeholder.width > placeholder.height, sent: ask.sent,
            received: versions[ask.file]),
          "file \(ask.file) sent \(ask.sent) received \(versions[ask.file])")
      case .image(let image):
        guard let ask = asked["\(image.slot)/\(image.token)"] else { continue }
        guard let (colour, landscape) = Self.shown(byThumbnail: image.data) else {
          tally.note("session-image", .unrecognised("no picture"), "")
          continue
        }
        tally.note(
          "session-image",
          Self.check(
            colour: colour, landscape: landscape, sent: ask.sent, received: versions[ask.file]),
          "file \(ask.file) sent \(ask.sent) received \(versions[ask.file])")
      case .error(let slot?, _, let token?, let code, let message):
        guard let ask = asked["\(slot)/\(token)"] else { continue }
        tally.failed(
          "session-image", "\(code) \(message)",
          emptyInput: code == "unsupported_format" && message == "empty input",
          rewriting: versions[ask.file] > ask.sent)
      case .error(_, _, _, let code, let message):
        tally.failed("session", "\(code) \(message)", emptyInput: false, rewriting: false)
      default: continue
      }
    }
    #expect(tally.problems.isEmpty, "\(tally.problems.prefix(20)) of \(tally.summary)")
    // Each kind was exercised and checked, not only answered. A file caught between its
    // truncation and its write is empty, and an answer may say so (above, every error must be
    // that one, during a rewrite); how many depends on how the machine schedules the writer,
    // so the bound here only catches a daemon that mostly fails.
    for kind in ["json", "json-boxed", "image", "header", "session-placeholder", "session-image"] {
      #expect(tally.count(kind, "fresh") >= 20, "\(kind): \(tally.summary)")
      #expect(tally.count(kind, "failed") * 2 <= tally.count(kind, "fresh"), "\(tally.summary)")
    }
  }
}
