import Foundation

/// One simulated scrolling list: a viewport of `slots` recycled cells over `items` items,
/// moved by a `ScrollProfile`. Items entering the viewport are loaded into the slot they
/// recycle (superseding what it held); a prefetch window ahead of the scroll direction is
/// announced in rounds and released when the window moves. Every shown image is checked: the
/// target's own display-time check first, then the item number decoded from the pixels
/// against the item the slot holds.
actor ListDriver {
  struct Configuration: Sendable {
    var items: Int
    var slots: Int
    var size: Int
    var prefetchWindow: Int
    var seed: UInt64
    var steadySpeed: Double?
    /// Item numbers of this list start here (lists may share items or not).
    var itemOffset: Int
    /// Loads ask for a preview ahead of the image.
    var preview = false
  }

  private struct Binding {
    let item: Int
    let token: Int
    let loadedAt: Double
    /// On the origin's change clock, when items change.
    var askedAt: Double?
    var delivered = false
    /// When the first thing (a placeholder, a preview or the image) was painted, ms after the
    /// load.
    var firstPixelMs: Double?
    /// When the preview was painted, ms after the load.
    var previewMs: Double?
  }

  private let client: any LoadClient
  private let configuration: Configuration
  private let measurements: Measurements
  private let url: @Sendable (Int) -> String
  private let staleness: Staleness?
  private var profile: ScrollProfile
  private var position = 0.0
  private var slots: [Int: Binding] = [:]
  private var nextToken = 0
  private var round = 0
  private var openRound: Int?
  private var prefetchAnchor: Int?

  init(
    client: any LoadClient, configuration: Configuration, measurements: Measurements,
    url: @escaping @Sendable (Int) -> String, staleness: Staleness? = nil
  ) {
    self.client = client
    self.configuration = configuration
    self.measurements = measurements
    self.url = url
    self.staleness = staleness
    profile = ScrollProfile(seed: configuration.seed, steadySpeed: configuration.steadySpeed)
  }

  /// Loads still waiting for their image.
  var pending: Int { slots.values.count { !$0.delivered } }

  /// Moves the list by `dt` seconds and issues the loads and prefetches that follow.
  func step(now: Double, dt: Double) {
    let maxPosition = Double(max(0, configuration.items - configuration.slots))
    profile.advance(
      now: now, dt: dt,
      atEdge: position <= 0 && profile.velocity < 0
        || position >= maxPosition && profile.velocity > 0)
    position = min(maxPosition, max(0, position + profile.velocity * dt))
    let first = Int(position)
    for index in first..<min(configuration.items, first + configuration.slots) {
      let slot = index % configuration.slots
      let item = configuration.itemOffset + index
      if slots[slot]?.item == item { continue }
      if let old = slots[slot], !old.delivered {
        // The cell is recycled before its image came: the target must drop that work.
        measurements.recordSuperseded(latencyMs: (now - old.loadedAt) * 1000)
      }
      nextToken += 1
      let source = url(item)
      slots[slot] = Binding(
        item: item, token: nextToken, loadedAt: now, askedAt: staleness?.mutations.elapsed)
      measurements.countLoad(url: source)
      try? client.load(
        slot: slot, item: String(item), token: nextToken, url: source, size: configuration.size,
        visible: true, preview: configuration.preview)
    }
    updatePrefetch(first: first)
  }

  private func updatePrefetch(first: Int) {
    let window = configuration.prefetchWindow
    guard window > 0, abs(profile.velocity) > 0.5 else { return }
    let forward = profile.velocity > 0
    // A new round each time the viewport has moved half a window (or turned around).
    let anchor = (forward ? 1 : -1) * (first / max(1, window / 2) + 1)
    guard anchor != prefetchAnchor else { return }
    prefetchAnchor = anchor
    if let openRound { try? client.release(round: openRound) }
    let range =
      forward
      ? (first + configuration.slots)..<min(
        configuration.items, first + configuration.slots + window)
      : max(0, first - window)..<first
    guard !range.isEmpty else {
      openRound = nil
      return
    }
    round += 1
    let entries = range.map { index in
      let item = configuration.itemOffset + index
      return (item: String(item), url: url(item))
    }
    measurements.countPrefetch(urls: entries.map(\.url))
    try? client.prefetch(round: round, items: entries, size: configuration.size)
    openRound = round
  }

  /// Applies one result from the target at time `now`.
  func handle(_ event: TargetEvent, now: Double) {
    switch event {
    case .image(let slot, let item, let token, let cache, let data):
      // What a UI does right before showing: ask the target whether the cell still wants it.
      guard client.isCurrent(slot: slot, item: item, token: token) else {
        measurements.countClientStale()
        return
      }
      // Shown. From here on, anything but the slot's own item is a wrong delivery.
      guard var binding = slots[slot] else {
        measurements.recordWrong(
          "slot \(slot) shows item \(item) but holds nothing", undecodable: false)
        return
      }
      let read = ItemImage.read(data)
      let shown = read?.item
      guard shown == binding.item else {
        measurements.recordWrong(
          "slot \(slot) holds item \(binding.item) (token \(binding.token)) but shows "
            + (shown.map { "item \($0)" } ?? "an unreadable image") + " (token \(token))",
          undecodable: shown == nil)
        return
      }
      guard !binding.delivered else { return }
      binding.delivered = true
      if binding.firstPixelMs == nil {
        binding.firstPixelMs = (now - binding.loadedAt) * 1000
        measurements.recordFirstPixel(ms: binding.firstPixelMs!, kind: .image)
      }
      slots[slot] = binding
      // The right item: is it a revision the freshness bound still allows?
      if let staleness, let read, let askedAt = binding.askedAt,
        let late = staleness.lateness(item: read.item, shows: read.revision, askedAt: askedAt)
      {
        measurements.recordStale(
          "slot \(slot) shows item \(read.item) at revision \(read.revision) (mod \(ItemImage.revisions)), "
            + "superseded \(Int(late * 1000)) ms before the freshness bound of the load")
      }
      let elapsed = (now - binding.loadedAt) * 1000
      measurements.recordImage(
        outcome: cache, latencyMs: elapsed, timeToVisibleMs: elapsed, at: now, item: binding.item)
      measurements.recordPaint(
        outcome: cache, firstPixelMs: binding.firstPixelMs ?? elapsed,
        previewMs: binding.previewMs, imageMs: elapsed)
    case .error(let slot, _, let token, let code):
      if let slot, let binding = slots[slot], binding.token == token {
        slots[slot]?.delivered = true
        measurements.recordError(code: code, latencyMs: (now - binding.loadedAt) * 1000)
      }
    case .prefetched:
      measurements.countPrefetchResult(ok: true)
    case .prefetchError:
      measurements.countPrefetchResult(ok: false)
    case .placeholder(let slot, let item, let token):
      // Held to the images' rule: only for the slot's current item and token, and never
      // once its image is shown.
      guard let binding = held(slot: slot, item: item, token: token, kind: "placeholder") else {
        return
      }
      if binding.delivered {
        measurements.recordWrong(
          "slot \(slot) was sent a placeholder after its image (item \(item))", undecodable: false)
      } else if binding.firstPixelMs == nil {
        slots[slot]?.firstPixelMs = (now - binding.loadedAt) * 1000
        measurements.recordFirstPixel(ms: (now - binding.loadedAt) * 1000, kind: .placeholder)
      }
    case .preview(let slot, let item, let token, let data):
      showPreview(slot: slot, item: item, token: token, data: data, now: now)
    }
  }

  /// The slot's binding when a `kind` sent for `item` and `token` may be shown in it: nil,
  /// counted, when the client has moved the slot on (stale, the client's own check), or
  /// when the slot holds another item or token (wrong: the server's fault).
  private func held(slot: Int, item: String, token: Int, kind: String) -> Binding? {
    guard client.isCurrent(slot: slot, item: item, token: token) else {
      measurements.countClientStale()
      return nil
    }
    guard let binding = slots[slot], String(binding.item) == item, binding.token == token else {
      measurements.recordWrong(
        "slot \(slot) was sent a \(kind) for item \(item) (token \(token)) it does not hold",
        undecodable: false)
      return nil
    }
    return binding
  }

  /// A preview, held to the images' rule and checked like one: the slot's current item and
  /// token, its pixels that item's, at most one per load, never after the image.
  private func showPreview(slot: Int, item: String, token: Int, data: [UInt8], now: Double) {
    guard var binding = held(slot: slot, item: item, token: token, kind: "preview") else {
      return
    }
    let shown = ItemImage.read(data)?.item
    guard shown == binding.item else {
      measurements.recordWrong(
        "slot \(slot) holds item \(binding.item) but its preview shows "
          + (shown.map { "item \($0)" } ?? "an unreadable image"),
        undecodable: shown == nil)
      return
    }
    guard !binding.delivered, binding.previewMs == nil else {
      measurements.recordWrong(
        "slot \(slot) was sent a preview "
          + (binding.delivered ? "after its image" : "twice") + " (item \(item))",
        undecodable: false)
      return
    }
    let elapsed = (now - binding.loadedAt) * 1000
    binding.previewMs = elapsed
    if binding.firstPixelMs == nil {
      binding.firstPixelMs = elapsed
      measurements.recordFirstPixel(ms: elapsed, kind: .preview)
    }
    slots[slot] = binding
    measurements.recordPreview(ms: elapsed, path: URL(string: url(binding.item))?.path)
  }
}
