import CSystem
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's signals, read from CSystem's signal pipe on a thread of their own. The handler
/// is installed with sigaction first thing in `main` (`install()`), so a signal that arrives at
/// any later moment is queued, never lost. The way before, a dispatch signal source, ignored
/// the signal between `signal(SIG_IGN)` and the moment dispatch installed its handler, which it
/// does later on its own thread: a SIGTERM right after the first answer was dropped, and the
/// daemon ran on. (Blocking the signals and calling sigwait does not work either: the main
/// thread ends in dispatch's sigsuspend, which unblocks them there.)
enum SignalWaiter {
  /// The signals `serve` handles.
  static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP]

  /// The pipe's read end, once installed.
  nonisolated(unsafe) private static var pipe: Int32 = -1

  /// Installs the handlers. Call first thing in `main`, before anything can be signalled.
  static func install() {
    pipe = handled.withUnsafeBufferPointer {
      ts_signals_install($0.baseAddress, Int32($0.count))
    }
  }

  /// Calls `handler` with each signal, in order, on a thread of its own, for as long as the
  /// process runs. Signals that came before this call are handled first.
  static func start(_ handler: @escaping @Sendable (Int32) -> Void) {
    let fd = pipe
    guard fd >= 0 else { return }
    SystemThread.detach(name: "thumbd-signals") {
      var byte: UInt8 = 0
      while true {
        let n = read(fd, &byte, 1)
        if n == 1 {
          handler(Int32(byte))
        } else if n < 0 && errno == EINTR {
          continue
        } else {
          return
        }
      }
    }
  }
}
