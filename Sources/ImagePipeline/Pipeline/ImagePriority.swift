import Synchronization

/// How urgently a consumer wants a result. Work runs at the highest priority among its
/// subscribers.
public enum ImagePriority: Int, Comparable, Sendable, CaseIterable {
  /// Speculative work for items about to appear.
  case prefetch
  /// Ordinary requests.
  case normal
  /// Something on screen is waiting for it.
  case visible

  /// Orders by urgency.
  public static func < (lhs: ImagePriority, rhs: ImagePriority) -> Bool {
    lhs.rawValue < rhs.rawValue
  }
}

/// A priority that can change while work is queued or running; readers always see the latest.
final class PriorityBox: Sendable {
  private let raw: Atomic<Int>

  init(_ priority: ImagePriority) { raw = Atomic(priority.rawValue) }

  var value: ImagePriority {
    get { ImagePriority(rawValue: raw.load(ordering: .relaxed)) ?? .normal }
    set { raw.store(newValue.rawValue, ordering: .relaxed) }
  }
}

/// What one unit of coalesced work shares with the code doing it: its effective priority (the
/// most urgent subscriber's), the client that started it (whose share of prefetch capacity it
/// uses), a flag raised when everyone left, and listeners that carry priority changes upstream.
final class JobContext: Sendable {
  let priority: PriorityBox
  let client: ClientID
  let cancellation = CancellationFlag()
  /// The job's one chance to publish a preview (`Announcements`).
  let previews = PreviewTurn()
  private let listeners = Mutex<[@Sendable () -> Void]>([])
  /// Subscribers that have not been cancelled, counted down synchronously the moment a
  /// subscriber's task is cancelled (the stage forgets it a hop later). Queues read it to pass
  /// over work everyone has just left: a round of prefetch hints released at once must not
  /// have one of its own items take a place another of them gave up.
  private let wanting = Atomic<Int>(0)

  init(priority: ImagePriority, client: ClientID = .shared) {
    self.priority = PriorityBox(priority)
    self.client = client
  }

  /// Whether some subscriber still wants the work.
  var isWanted: Bool { wanting.load(ordering: .acquiring) > 0 }

  func countSubscriber() { wanting.add(1, ordering: .releasing) }

  func uncountSubscriber() { wanting.subtract(1, ordering: .releasing) }

  /// Calls `listener` whenever the effective priority changes.
  func onPriorityChange(_ listener: @escaping @Sendable () -> Void) {
    listeners.withLock { $0.append(listener) }
  }

  func setPriority(_ priority: ImagePriority) {
    guard priority != self.priority.value else { return }
    self.priority.value = priority
    for listener in listeners.withLock({ $0 }) { listener() }
  }
}
