import Foundation

/// A kind of run; `--scenario` takes the raw values.
public enum Scenario: String, CaseIterable, Sendable {
  /// Lists scrolling with pauses, flings and reversals.
  case scroll
  /// Many clients asking for one cold item at once.
  case stampede
  /// Lists scrolling alike over the same items at 64, 128 and 256 px.
  case gridSizes = "grid-sizes"
  /// Steady scrolling, for long runs.
  case soak
}

/// What to run.
public struct RunOptions: Sendable {
  /// Scenarios, combined in order.
  public var scenarios: [Scenario] = [.scroll]
  /// Seconds of scrolling (scroll, grid-sizes, soak).
  public var duration = 30.0
  /// Virtual lists (one client each).
  public var lists = 4
  /// Items per list.
  public var items = 400
  /// Cells per viewport.
  public var slots = 12
  /// Thumbnail box in pixels.
  public var size = 128
  /// Items announced ahead of the scroll direction; 0 disables prefetch.
  public var prefetchWindow = 24
  /// Items a separate flooding client keeps asking to prefetch at once; 0 for none.
  public var prefetchFlood = 0
  /// `cold`; `warm` (every item loaded once before measuring); or `index` (every item loaded
  /// once at another size, `Runner.indexSize`: the placeholder index knows every source, and
  /// every load of the run is still a miss).
  public var cache = "cold"
  /// Loads ask for a preview ahead of the image (`preview: true`).
  public var preview = false
  /// Seed for scrolling and the origin.
  public var seed: UInt64 = 1
  /// Clients in a stampede.
  public var stampedeClients = 50
  /// Rounds of stampede, each on a new cold item.
  public var stampedeRounds = 5
  /// Seconds past an item's change, beyond the origin's max-age, that a load may still get
  /// the old revision before it counts as a stale delivery (the server's clock and the
  /// origin's round to whole seconds).
  public var staleSlack = 1.0

  /// Defaults.
  public init() {}
}

/// Runs scenarios against a target and measures them.
public final class Runner: Sendable {
  let target: any LoadTarget
  let options: RunOptions
  let origin: any ImageOrigin
  let measurements = Measurements()
  let progress: (@Sendable (Double, Measurements) -> Void)?

  /// Prepares a run; `progress` is called about twice a second with the elapsed seconds.
  public init(
    target: any LoadTarget, options: RunOptions, origin: any ImageOrigin,
    progress: (@Sendable (Double, Measurements) -> Void)? = nil
  ) {
    self.target = target
    self.options = options
    self.origin = origin
    self.progress = progress
  }

  /// Runs every scenario and returns the report.
  public func run() async throws -> Report {
    let started = ContinuousClock.now
    let before = target.serverFigures()
    let originBefore = origin.requests ?? [:]
    var stampede: Report.Stampede?
    var scrolled = 0.0
    for scenario in options.scenarios {
      switch scenario {
      case .scroll, .soak, .gridSizes:
        scrolled += try await scroll(scenario)
      case .stampede:
        stampede = try await runStampede()
      }
    }
    let after = target.serverFigures()
    let elapsed = started.duration(to: .now).seconds
    return Report.make(
      options: options, target: target.name, measurements: measurements, elapsed: elapsed,
      scrolledSeconds: scrolled, originBefore: originBefore, origin: origin, before: before,
      after: after, stampede: stampede)
  }

  /// Stampede items start here: above every list's items, below `ItemImage.maxItem`.
  static let stampedeItems = 1_000_000
  /// The box `--cache index` loads every item at: no scenario's size.
  public static let indexSize = 40

  /// How shown revisions are judged, when the origin's items change.
  var staleness: Staleness? {
    origin.mutations.map {
      Staleness(mutations: $0, bound: Double(origin.maxAge ?? 0) + options.staleSlack)
    }
  }

  private func now(since start: ContinuousClock.Instant) -> Double {
    start.duration(to: .now).seconds
  }

  /// Scrolling lists for `duration` seconds, then up to 10 s for the last visible loads.
  private func scroll(_ scenario: Scenario) async throws -> Double {
    var configurations: [ListDriver.Configuration] = []
    let sizes = scenario == .gridSizes ? [64, 128, 256] : [options.size]
    let lists = scenario == .gridSizes ? max(3, options.lists) : options.lists
    for index in 0..<lists {
      configurations.append(
        .init(
          items: options.items, slots: options.slots, size: sizes[index % sizes.count],
          prefetchWindow: options.prefetchWindow,
          // grid-sizes: lists scroll alike over the same items at different sizes.
          seed: scenario == .gridSizes ? options.seed : options.seed &+ UInt64(index) &* 7919,
          steadySpeed: scenario == .soak ? 6 : nil,
          itemOffset: scenario == .gridSizes ? 0 : index * options.items,
          preview: options.preview))
    }
    switch options.cache {
    case "warm": try await warm(configurations)
    case "index": try await warm(configurations, size: Self.indexSize)
    default: break
    }
    // The first screens are asked for all at once: have the origin make them beforehand, so
    // the run measures the server rather than the origin encoding dozens of images at once.
    origin.prepare(
      items: configurations.flatMap { configuration in
        (0..<min(configuration.items, configuration.slots + configuration.prefetchWindow)).map {
          configuration.itemOffset + $0
        }
      })
    let start = ContinuousClock.now
    let clients = try configurations.map { _ in try target.connect() }
    let drivers = zip(clients, configurations).map { client, configuration in
      ListDriver(
        client: client, configuration: configuration, measurements: measurements,
        url: { [origin] in origin.url(item: $0) }, staleness: staleness)
    }
    var consumers: [Task<Void, Never>] = []
    for (client, driver) in zip(clients, drivers) {
      consumers.append(
        Task {
          for await event in client.events {
            await driver.handle(event, now: start.duration(to: .now).seconds)
          }
        })
    }
    let flood =
      options.prefetchFlood > 0
      ? FloodClient(
        client: try target.connect(), count: options.prefetchFlood, origin: origin,
        measurements: measurements) : nil
    let sampler = Task { [target, measurements] in
      while !Task.isCancelled {
        measurements.recordRSS(
          at: start.duration(to: .now).seconds, bytes: target.serverFigures().residentBytes)
        try? await Task.sleep(for: .seconds(1))
      }
    }
    let tick = 1.0 / 60
    var last = 0.0
    while now(since: start) < options.duration {
      let time = now(since: start)
      for driver in drivers { await driver.step(now: time, dt: time - last) }
      if Int(time * 2) != Int(last * 2) { progress?(time, measurements) }
      last = time
      try? await Task.sleep(for: .milliseconds(Int(tick * 1000)))
    }
    await flood?.stop()
    // Let the loads of what is on screen now finish.
    let grace = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < grace {
      var pending = 0
      for driver in drivers { pending += await driver.pending }
      if pending == 0 { break }
      try? await Task.sleep(for: .milliseconds(20))
    }
    sampler.cancel()
    for client in clients { client.close() }
    for consumer in consumers { await consumer.value }
    progress?(options.duration, measurements)
    return options.duration
  }

  /// Loads every item once, unmeasured (at each list's size, or at `size`), so the run starts
  /// with warm caches (or, at another size, with only the placeholder index warm).
  private func warm(_ configurations: [ListDriver.Configuration], size: Int? = nil) async throws {
    let client = try target.connect()
    defer { client.close() }
    var events = client.events.makeAsyncIterator()
    var token = 0
    var outstanding = 0
    for configuration in configurations {
      for index in 0..<configuration.items {
        let item = configuration.itemOffset + index
        token += 1
        try client.load(
          slot: token % 4096, item: String(item), token: token, url: origin.url(item: item),
          size: size ?? configuration.size, visible: false, preview: false)
        outstanding += 1
        // Bounded batches: at most 64 loads in flight.
        while outstanding >= 64, let event = await events.next() {
          if case .image = event {
            outstanding -= 1
          } else if case .error = event {
            outstanding -= 1
          }
        }
      }
    }
    while outstanding > 0, let event = await events.next() {
      if case .image = event { outstanding -= 1 } else if case .error = event { outstanding -= 1 }
    }
  }

  /// `stampedeClients` clients ask for one cold item at the same moment, `stampedeRounds`
  /// times; the origin must see one fetch per item.
  private func runStampede() async throws -> Report.Stampede {
    var urls: [String] = []
    var delivered = 0
    var failed = 0
    for roundIndex in 0..<options.stampedeRounds {
      let item = Self.stampedeItems + Int(options.seed % 4000) * 10 + roundIndex
      let url = origin.url(item: item)
      urls.append(url)
      let clients = try (0..<options.stampedeClients).map { _ in try target.connect() }
      let results = await withTaskGroup(of: Bool.self) { group in
        for client in clients {
          group.addTask {
            try? client.load(
              slot: 0, item: String(item), token: 1, url: url, size: self.options.size,
              visible: true, preview: false)
            for await event in client.events {
              if case .image(_, _, _, _, let data) = event {
                return ItemImage.item(in: data) == item
              }
              if case .error = event { return false }
            }
            return false
          }
        }
        var outcomes: [Bool] = []
        for await outcome in group { outcomes.append(outcome) }
        return outcomes
      }
      for client in clients { client.close() }
      delivered += results.count { $0 }
      failed += results.count { !$0 }
    }
    let paths = Set(urls.map { URL(string: $0)!.path })
    let fetches = (origin.requests ?? [:]).filter { paths.contains($0.key) }.values.reduce(0, +)
    return Report.Stampede(
      clients: options.stampedeClients, uniqueSources: urls.count, originFetches: fetches,
      delivered: delivered, failed: failed)
  }
}

extension Duration {
  /// As fractional seconds.
  var seconds: Double {
    Double(components.seconds) + Double(components.attoseconds) / 1e18
  }
}
