import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Feeds bytes through a named pipe on a thread of its own: the first part, then a pause step
/// the test controls, then the rest. A reader of the FIFO cannot finish before the rest is
/// written, which makes "stop part-way" tests deterministic.
enum FIFOFeeder {
  /// Creates a FIFO in the temporary directory; the caller unlinks it.
  static func make() -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent(
      "thumbd-fifo-\(UUID().uuidString)"
    ).path
    signal(SIGPIPE, SIG_IGN)  // a reader that stops early closes its end
    precondition(mkfifo(path, 0o600) == 0, "mkfifo failed")
    return path
  }

  /// Writes `bytes[..<split]`, runs `between` (on the feeding thread), then writes the rest.
  static func feed(
    _ bytes: [UInt8], to path: String, split: Int, between: @escaping @Sendable () -> Void
  ) {
    Thread.detachNewThread {
      let fd = open(path, O_WRONLY)
      guard fd >= 0 else { return }
      bytes.withUnsafeBytes { raw in
        var offset = 0
        func send(upTo end: Int) {
          while offset < end {
            let n = write(fd, raw.baseAddress! + offset, end - offset)
            if n <= 0 { return }  // the reader stopped and closed: EPIPE
            offset += n
          }
        }
        send(upTo: split)
        between()
        send(upTo: raw.count)
      }
      close(fd)
    }
  }
}
