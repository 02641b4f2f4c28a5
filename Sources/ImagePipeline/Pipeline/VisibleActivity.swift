import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// When the pipeline last saw requests someone is waiting for (visible loads, memory hits
/// included), overall and per client. Prefetch admission reads it: while visible requests
/// arrive, prefetch from clients that are not showing anything themselves (background
/// warming, floods of hints) is held back, and look-ahead from clients that are keeps its
/// places. Stamps are cheap, because memory hits are answered on a server's I/O thread.
final class VisibleActivity: Sendable {
  private struct State {
    var last: UInt64 = 0
    var byClient: [ClientID: UInt64] = [:]
  }

  /// How long a visible request counts as recent, in seconds.
  let window: Double
  private let state = Mutex(State())

  init(window: Double = 0.25) { self.window = window }

  /// Records a visible request for `client` now.
  func note(_ client: ClientID) {
    let now = Self.now()
    state.withLock { state in
      state.last = now
      state.byClient[client] = now
      // Forget clients gone quiet, so the table stays the size of the active ones.
      if state.byClient.count > 4096 {
        let horizon = UInt64(window * 1e9)
        state.byClient = state.byClient.filter { now &- $0.value < horizon }
      }
    }
  }

  /// Whether any visible request came within the window.
  var isBusy: Bool {
    let last = state.withLock { $0.last }
    return last != 0 && Self.now() &- last < UInt64(window * 1e9)
  }

  /// Whether `client` itself made a visible request within the window.
  func isInteractive(_ client: ClientID) -> Bool {
    guard let last = state.withLock({ $0.byClient[client] }) else { return false }
    return Self.now() &- last < UInt64(window * 1e9)
  }

  private static func now() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
  }
}
