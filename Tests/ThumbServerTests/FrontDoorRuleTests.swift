import ImagePipeline
import Testing

@testable import ThumbServer

/// The pure rules of the web front door: presets read from config, client hints rounded into
/// a small set, and the per-client token bucket with its forwarded-address rule, on a clock
/// the test moves.
@Suite("Front door rules")
struct FrontDoorRuleTests {
  static func request(
    _ headers: [String], overNetwork: Bool = true, peer: String? = "192.0.2.10"
  ) throws -> HTTPRequest {
    var parser = HTTPRequestParser()
    let text =
      "GET /x HTTP/1.1\r\nHost: t\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n"
    var request = try #require(try parser.feed(Array(text.utf8)).first)
    request.overNetwork = overNetwork
    request.peer = peer.flatMap(IPAddress.init)
    return request
  }

  @Test(
    "presets: definitions checked at start-up, each failure naming the definition",
    arguments: [
      ("card", "NAME=OPTIONS"), ("=w:1", "name"), ("a b=w:1", "name"),
      ("x=exar:1", "preset 'x': option 'exar'"), ("x=pr:y", "cannot name presets"),
      ("x=w:-4", "'-4'"),
    ])
  func presetErrors(definition: String, naming: String) {
    #expect(throws: PresetError.self) { try Presets(definitions: [definition], only: false) }
    do {
      _ = try Presets(definitions: [definition], only: false)
    } catch {
      #expect(error.description.contains(naming), "\(error.description)")
    }
  }

  @Test("presets: duplicates refused, presets_only needs one, lists applied in order")
  func presetRules() throws {
    #expect(throws: PresetError.self) { try Presets(definitions: ["a=w:1", "a=w:2"], only: false) }
    #expect(throws: PresetError.self) { try Presets(definitions: [], only: true) }
    // Bounded: so many definitions, or one so long, is a config error, not a table.
    #expect(throws: PresetError.self) {
      try Presets(definitions: (0...Presets.maxPresets).map { "p\($0)=w:1" }, only: false)
    }
    #expect(throws: PresetError.self) {
      try Presets(
        definitions: ["long=" + Array(repeating: "w:1", count: 1400).joined(separator: "/")],
        only: false)
    }
    #expect(throws: Never.self) {
      try Presets(definitions: (1...Presets.maxPresets).map { "p\($0)=w:1" }, only: false)
    }
    let presets = try Presets(
      definitions: ["a=w:10/q:50", "b=w:20/f:png", "default=h:5"], only: false)
    var options = ImageOptions()
    presets.applyDefault(to: &options)
    #expect(presets.apply(names: "a:b", to: &options) == nil)
    #expect(options.width == 20 && options.height == 5 && options.quality == 50)
    #expect(options.format == "png")
    #expect(presets.apply(names: "a:zz", to: &options)?.message.contains("'zz'") == true)
    #expect(presets.apply(names: "", to: &options) != nil, "an empty name is no preset")
  }

  @Test("start-up refuses client hints that could reach more sizes than a source keeps")
  func hintsFitTheVariantBound() throws {
    var config = DaemonConfig()
    config.clientHints = true
    #expect(try Daemon.clientHints(config) != nil, "the defaults fit")
    config.maxVariantsPerSource = 40
    #expect(throws: StartupError.self) { _ = try Daemon.clientHints(config) }
    config.maxVariantsPerSource = 0
    #expect(try Daemon.clientHints(config) != nil, "no bound, nothing to exceed")
    config.clientHints = false
    config.maxVariantsPerSource = 1
    #expect(try Daemon.clientHints(config) == nil)
  }

  @Test("client hints: 16 widths at the default maximum, each hint rounded up, capped")
  func hintLadder() {
    let hints = ClientHints()
    #expect(hints.widthSteps.count == 16)
    #expect(hints.widthSteps.first == 64 && hints.widthSteps.last == 2048)
    #expect(hints.widthSteps == hints.widthSteps.sorted())
    for width in 1...5000 {
      let rounded = hints.roundedWidth(width)
      #expect(hints.widthSteps.contains(rounded))
      #expect(rounded >= min(width, 2048), "\(width) -> \(rounded)")
    }
    #expect(hints.roundedDPR(0.5) == 1 && hints.roundedDPR(1.1) == 1.5)
    #expect(hints.roundedDPR(2.625) == 3 && hints.roundedDPR(9) == 3)
    #expect(ClientHints(maxWidth: 500, maxDPR: 1).widthSteps.last == 500)
    #expect(ClientHints(maxWidth: 500, maxDPR: 1).roundedDPR(3) == 1)
  }

  @Test("client hints size only a request naming no size; Sec-CH wins over the legacy names")
  func hintsApply() throws {
    let hints = ClientHints()
    var open = ImageOptions()
    let consulted = hints.apply(
      to: &open,
      from: try Self.request(["Sec-CH-DPR: 2", "DPR: 1", "Width: 999", "Sec-CH-Width: 300"])
    )
    #expect(
      open.scale == nil && open.width == 320,
      "300 device px -> 320, whatever the DPR: one entry for the same pixels")
    var dprOnly = ImageOptions()
    _ = hints.apply(to: &dprOnly, from: try Self.request(["Sec-CH-DPR: 1.7"]))
    #expect(dprOnly.scale == 2 && dprOnly.width == 0)
    var dprOne = ImageOptions()
    _ = hints.apply(to: &dprOne, from: try Self.request(["DPR: 1"]))
    #expect(dprOne == ImageOptions(), "DPR 1 is no scale: the same entry as no hint")
    // However hints are cycled, a source's hinted sizes fit in what the default keeps.
    #expect(
      hints.variantsPerFormat * ClientHints.formatsPerPath <= DaemonConfig().maxVariantsPerSource)
    #expect(Set(consulted) == ["Sec-CH-DPR", "DPR", "Sec-CH-Width", "Width"])
    for named in [
      ImageOptions(width: 100), ImageOptions(height: 50), ImageOptions(scale: 1),
    ] {
      var options = named
      #expect(hints.apply(to: &options, from: try Self.request(["Sec-CH-Width: 300"])).isEmpty)
      #expect(options == named)
    }
    var garbage = ImageOptions()
    _ = hints.apply(to: &garbage, from: try Self.request(["DPR: nan", "Width: -3"]))
    #expect(garbage.width == 0 && garbage.scale == nil)
  }

  @Test("the bucket: a burst, then the rate, with the wait until the next token")
  func bucket() throws {
    let limiter = ClientLimiter(rate: 2, burst: 3, trustedProxies: [])
    let start = ContinuousClock.now
    let client = try #require(IPAddress("192.0.2.1"))
    for _ in 0..<3 { #expect(limiter.admit(client, now: start) == nil) }
    let wait = try #require(limiter.admit(client, now: start))
    #expect(abs(wait - 0.5) < 1e-9)
    #expect(limiter.admit(client, now: start + .milliseconds(499)) != nil)
    #expect(limiter.admit(client, now: start + .milliseconds(1001)) == nil)
    #expect(limiter.admit(client, now: start + .seconds(100)) == nil, "refilled, capped at burst")
    #expect(limiter.admit(client, now: start + .seconds(100)) == nil)
    #expect(limiter.admit(client, now: start + .seconds(100)) == nil)
    #expect(limiter.admit(client, now: start + .seconds(100)) != nil)
    #expect(limiter.refused == 3)
  }

  @Test("who the client is: the peer, a forwarded address only past trusted proxies, IPv6 by /64")
  func clientIdentity() throws {
    let limiter = ClientLimiter(
      rate: 1, burst: 1, trustedProxies: [IPNetwork("10.0.0.0/8")!, IPNetwork("::1/128")!])
    func client(_ headers: [String], peer: String?, overNetwork: Bool = true) throws -> String? {
      limiter.client(
        of: try Self.request(headers, overNetwork: overNetwork, peer: peer))?.description
    }
    #expect(try client([], peer: "192.0.2.1") == "192.0.2.1")
    #expect(try client(["X-Forwarded-For: 198.51.100.1"], peer: "192.0.2.1") == "192.0.2.1")
    #expect(try client(["X-Forwarded-For: 198.51.100.1"], peer: "10.1.2.3") == "198.51.100.1")
    // Right to left, past every trusted hop; a spoofed far-left address is not believed.
    #expect(
      try client(["X-Forwarded-For: 6.6.6.6, 198.51.100.1, 10.9.9.9"], peer: "10.1.2.3")
        == "198.51.100.1")
    #expect(try client(["X-Forwarded-For: junk"], peer: "10.1.2.3") == "10.1.2.3")
    #expect(
      try client([], peer: "2001:db8:1:2:aaaa::1") == client([], peer: "2001:db8:1:2:bbbb::9"))
    #expect(try client([], peer: "2001:db8:1:2::1") != client([], peer: "2001:db8:1:3::1"))
    // The Unix socket: only what a proxy forwarded is limited.
    #expect(try client([], peer: nil, overNetwork: false) == nil)
    #expect(
      try client(["X-Forwarded-For: 198.51.100.2"], peer: nil, overNetwork: false)
        == "198.51.100.2")
  }

  @Test("at most maxClients buckets: idle ones go first, then some busy ones")
  func boundedBuckets() throws {
    let limiter = ClientLimiter(rate: 1, burst: 2, trustedProxies: [], maxClients: 64)
    let start = ContinuousClock.now
    for index in 0..<1000 {
      _ = limiter.admit(.v4(198, 51, UInt8(index / 256), UInt8(index % 256)), now: start)
      #expect(limiter.clients <= 64)
    }
    let later = start + .seconds(10)
    _ = limiter.admit(.v4(203, 0, 113, 1), now: later)
    #expect(limiter.clients == 1, "every other bucket had refilled")
  }
}
