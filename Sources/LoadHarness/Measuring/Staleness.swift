/// Judges the revision a shown thumbnail carries against the origin's schedule of changes.
///
/// A load asked at time L may be answered from a cache entry fetched no earlier than
/// L - max-age (a correct server never serves it older), so a revision that stopped being
/// current before L - `bound` (the origin's max-age plus a slack) is a stale delivery.
/// Judged against the load's own time, never the time the answer was handled, so a busy
/// machine delaying delivery cannot make a correct server look stale.
struct Staleness: Sendable {
  let mutations: Mutations
  /// Seconds after a change that a load may still get the old revision.
  let bound: Double

  /// How many seconds before the load's bound the revision a thumbnail of `item` shows
  /// (modulo `ItemImage.revisions`) was superseded, or nil when it is allowed. The newest
  /// revision with that residue is the one meant: an item would need 16 changes inside the
  /// bound to alias.
  func lateness(item: Int, shows revision: Int, askedAt: Double) -> Double? {
    let now = mutations.elapsed
    let current = mutations.revision(of: item, at: now)
    let modulus = ItemImage.revisions
    let behind = ((current - revision) % modulus + modulus) % modulus
    guard behind > 0,
      let ended = mutations.superseded(item, revision: current - behind, at: now)
    else { return nil }
    let late = askedAt - bound - ended
    return late > 0 ? late : nil
  }
}
