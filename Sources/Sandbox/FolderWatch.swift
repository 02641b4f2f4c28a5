import CSystem
import Synchronization
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Calls `changed` on a thread of its own when something is made, removed, renamed or written
/// in one of `folders` (those that exist when it starts), at most once per quiet `settle`
/// (a package install writes many files at once), until `stop()`.
public final class FolderWatch: Sendable {
  /// The wake descriptor while the thread holds it open; nil once the thread has closed its
  /// descriptors (so `stop()` never writes to a number since reused).
  private let wake: WakeHolder

  /// Watches `folders`; nil when none of them can be watched.
  public init?(
    folders: [String], settle: Duration = .milliseconds(200),
    changed: @escaping @Sendable () -> Void
  ) {
    let watcher = ts_watch_create()
    guard watcher >= 0 else { return nil }
    let watched = folders.filter { ts_watch_folder(watcher, $0) >= 0 }.count
    let wake = ts_wakeup_create()
    guard watched > 0, wake >= 0 else {
      close(watcher)
      if wake >= 0 { close(wake) }
      return nil
    }
    let shared = WakeHolder(wake)
    self.wake = shared
    let settleMilliseconds =
      Int32(settle.components.seconds * 1_000)
      + Int32(settle.components.attoseconds / 1_000_000_000_000_000)
    SystemThread.detach(name: "thumbd-watch") {
      while true {
        let event = ts_watch_wait(watcher, wake, -1)
        if event == 2 || event < 0 { break }
        guard event == 1 else { continue }
        // Until the folders are quiet for `settle`: then once.
        var woken = false
        while true {
          let more = ts_watch_wait(watcher, wake, settleMilliseconds)
          if more == 2 || more < 0 { woken = true }
          if more != 1 { break }
        }
        if woken { break }
        changed()
      }
      shared.descriptor.withLock { open in
        close(watcher)
        close(wake)
        open = nil
      }
    }
  }

  /// Stops watching; `changed` is not called after the watch thread sees this.
  public func stop() {
    wake.descriptor.withLock { open in
      if let open { _ = ts_wakeup_signal(open) }
    }
  }

  deinit { stop() }
}

/// The wake descriptor, shared by the watch and its thread.
private final class WakeHolder: Sendable {
  let descriptor: Mutex<Int32?>
  init(_ descriptor: Int32) { self.descriptor = Mutex(descriptor) }
}
