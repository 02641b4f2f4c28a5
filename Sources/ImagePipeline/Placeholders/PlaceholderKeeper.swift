/// Keeps and judges the pipeline's placeholders: what `PlaceholderIndex` holds, checked against
/// its source as a thumbnail is, and written to the placeholder cache behind delivery. Built
/// once, by the pipeline, from the parts it uses; the pipeline's public placeholder calls are
/// its.
struct PlaceholderKeeper: Sendable {
  /// The placeholders in memory.
  let index: PlaceholderIndex
  /// The placeholder cache, if any.
  let disk: DiskCache?
  /// The judge of a placeholder's source.
  let sources: SourceState
  /// Where disk writes wait behind delivery.
  let diskWrites: WriteBehind
  let metrics: PipelineMetrics

  /// The placeholder known in memory for `url` at `rev`, while the source still holds what it
  /// was made from: a file is `stat`ed after `received` (shared within a pass, as a memory
  /// hit's is), an origin's is judged by the newest version known and its freshness. nil
  /// otherwise; one made from content the source no longer holds is forgotten. No other I/O.
  func placeholder(
    for url: String, rev: String? = nil, received: ContinuousClock.Instant = .now
  ) -> Placeholder? {
    guard let known = index.known(url: url, rev: rev) else { return nil }
    return current(known, url: url, rev: rev, received: received)
  }

  /// The placeholder to name beside `thumbnail` (of `url` at `rev`, just judged current): the
  /// one known for the same content, so every size shows one look, else the thumbnail's own,
  /// else one made from its pixels (a disk hit carries none, and the one known may be of
  /// another version of a file rewritten meanwhile). Never one of other content.
  func placeholder(for url: String, rev: String?, of thumbnail: Thumbnail) -> Placeholder? {
    if let known = index.known(url: url, rev: rev),
      known.source.sameContent(as: thumbnail.source)
    {
      return known.placeholder
    }
    return thumbnail.placeholder ?? Placeholder(decoding: thumbnail)
  }

  /// The placeholder known for `url` at `rev`, in memory or on disk (read back into memory),
  /// judged against the source as `placeholder(for:rev:received:)` judges.
  func storedPlaceholder(
    for url: String, rev: String? = nil, received: ContinuousClock.Instant = .now
  ) async -> Placeholder? {
    if let known = index.known(url: url, rev: rev) {
      return current(known, url: url, rev: rev, received: received)
    }
    guard let disk,
      let entry = await disk.data(
        forKey: PlaceholderIndex.diskKey(url: url, rev: rev),
        group: PlaceholderIndex.diskGroup(url: url)),
      let stored = Placeholder(encoded: entry.payload),
      // An entry without the version it shows (or with one that does not read) is no answer.
      let decoded = SourceVersionCoding.decode(entry.metadata[...]),
      decoded.length == entry.metadata.count
    else { return nil }
    let known = PlaceholderIndex.Known(placeholder: stored, source: decoded.version)
    guard let placeholder = current(known, url: url, rev: rev, received: received) else {
      return nil
    }
    if index.known(url: url, rev: rev) == nil {
      index.record(known, url: url, rev: rev)
    }
    return placeholder
  }

  /// `known`'s placeholder when its source still holds what it shows; else nil, and a changed
  /// or superseded one is forgotten (a stale origin's stays, for a revalidation to renew).
  private func current(
    _ known: PlaceholderIndex.Known, url: String, rev: String?, received: ContinuousClock.Instant
  ) -> Placeholder? {
    switch sources.verdict(for: url, stored: known.source, received: received) {
    case .fresh: return known.placeholder
    case .stale: return nil
    case .changed, .superseded:
      index.forget(url: url, rev: rev)
      return nil
    }
  }

  /// The placeholder of `thumbnail` (of `url` at `rev`), its own or made from its bytes, kept
  /// as a rendered one's would be; nil when it has none and does not decode.
  func keepPlaceholder(decoding thumbnail: Thumbnail, url: String, rev: String?)
    -> Placeholder?
  {
    guard let made = thumbnail.placeholder ?? Placeholder(decoding: thumbnail) else { return nil }
    record(made, of: thumbnail.source, url: url, rev: rev)
    var shown = thumbnail
    shown.placeholder = made
    return placeholder(for: url, rev: rev, of: shown)
  }

  /// Keeps the placeholder a new thumbnail of `request` carries.
  func recordPlaceholder(of thumbnail: Thumbnail, for request: ImageRequest) {
    guard let placeholder = thumbnail.placeholder else { return }
    record(placeholder, of: thumbnail.source, url: request.url, rev: request.rev)
  }

  /// Keeps `placeholder` of `source` for `url` at `rev`: in memory at once, on disk behind
  /// delivery. A source keeps one look while its content stays (the one known for it is kept),
  /// and an older picture's look never replaces a newer one's: a placeholder of other content
  /// than the newest version known is not kept.
  private func record(
    _ placeholder: Placeholder, of source: SourceVersion, url: String, rev: String?
  ) {
    // A source that may not be stored leaves no trace, its look included.
    guard source.freshness.mayStore else { return }
    if let known = index.known(url: url, rev: rev), known.source.sameContent(as: source) {
      return
    }
    if let newest = sources.catalog.version(of: url), !newest.sameContent(as: source) { return }
    index.record(.init(placeholder: placeholder, source: source), url: url, rev: rev)
    guard let disk else { return }
    let dropped = !diskWrites.schedule {
      await disk.store(
        payload: placeholder.encoded, metadata: SourceVersionCoding.encode(source),
        forKey: PlaceholderIndex.diskKey(url: url, rev: rev),
        group: PlaceholderIndex.diskGroup(url: url))
    }
    if dropped { metrics.countDiskWriteSkipped() }
  }
}
