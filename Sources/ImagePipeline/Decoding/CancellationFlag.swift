import CImageCodecs
import Synchronization

/// A flag the C decode loop polls every few rows; raising it stops the decode with `cancelled`.
///
/// The flag lives in manually allocated memory so C can read it while Swift sets it from another
/// thread; both sides go through atomic C helpers, which is why the class is `@unchecked Sendable`.
public final class CancellationFlag: @unchecked Sendable {
  let storage: UnsafeMutablePointer<Int32>
  private let listeners = Mutex<[@Sendable () -> Void]>([])

  /// Creates a lowered flag.
  public init() {
    storage = .allocate(capacity: 1)
    storage.initialize(to: 0)
  }

  deinit { storage.deallocate() }

  /// Asks the decode that watches this flag to stop.
  public func cancel() {
    ic_cancel_flag_set(storage, 1)
    for listener in listeners.withLock({ $0 }) { listener() }
  }

  /// Calls `listener` when the flag is raised (at once when it already is): for work that
  /// waits on something other than the flag, such as a child process.
  public func whenCancelled(_ listener: @escaping @Sendable () -> Void) {
    listeners.withLock { $0.append(listener) }
    if isCancelled { listener() }
  }

  /// Whether `cancel()` has been called.
  public var isCancelled: Bool { ic_cancel_flag_get(storage) != 0 }
}
