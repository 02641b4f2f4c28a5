import CSystem
import Synchronization

/// Swift's cooperative pool, and the calls that block a thread.
///
/// A task with no executor of its own runs on the pool, which has a thread per core. A call
/// that blocks one of those threads (a socket read, a child process's end) holds it from every
/// other task of the process for as long as it waits: on two cores, two such calls stop all
/// the rest, an in-process daemon's misses and a test origin's answers among them.
///
/// Rules kept here:
/// - a blocking call says so first (``willBlock(_:)``); what follows is the process's choice
///   (``onBlocking(_:)``): nothing in the daemon and the CLI, whose blocking calls run on
///   threads of their own, and a failed test in the test suite;
/// - the check costs one lock when no one asked for it, so blocking calls may always make it.
public enum CooperativePool {
  private static let report = Mutex<(@Sendable (String) -> Void)?>(nil)

  /// Whether the calling thread runs a task on the cooperative pool: a task with no task
  /// executor of its own, on a thread other than the process's main thread. False on a thread
  /// outside Swift's concurrency (`SystemThread`, a `Thread` of Foundation's).
  public static var runsCaller: Bool {
    guard ts_thread_is_main() == 0 else { return false }
    return withUnsafeCurrentTask { task in
      guard let task else { return false }
      return task.unownedTaskExecutor == nil
    }
  }

  /// What happens when a blocking call is made on the pool: `handler` is given the call's
  /// name (nil: nothing happens, the default).
  public static func onBlocking(_ handler: (@Sendable (String) -> Void)?) {
    report.withLock { $0 = handler }
  }

  /// Says that the caller is about to block its thread in `call` (a name for the message).
  public static func willBlock(_ call: @autoclosure () -> String) {
    guard let handler = report.withLock({ $0 }), runsCaller else { return }
    handler(call())
  }
}
