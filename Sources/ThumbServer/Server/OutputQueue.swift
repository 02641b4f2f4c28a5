/// The bytes queued for one connection and not yet written, kept as the chunks they were
/// made in: a response's head and its body, which stays the cached thumbnail's own storage.
/// Copying an 11.8 KB memory hit into one buffer with its head was 4.7% of the event loop's
/// time under `bench/daemon_vs_nginx.sh` (perf: `memmove` under `HTTPResponse.serialized`).
/// Pure state; the loop does the writing.
struct OutputQueue {
  private var chunks: [[UInt8]] = []
  /// Bytes of `chunks[0]` already written.
  private var offset = 0
  /// Bytes queued and not yet written.
  private(set) var count = 0

  /// Whether everything queued has been written.
  var isEmpty: Bool { count == 0 }

  /// Queues `chunk` after everything queued before.
  mutating func append(_ chunk: [UInt8]) {
    guard !chunk.isEmpty else { return }
    chunks.append(chunk)
    count += chunk.count
  }

  /// Calls `write` with the unwritten bytes of the first two chunks (the second may be
  /// empty) and marks as written what it returns, when that is positive; returns it.
  mutating func write(_ write: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Int) -> Int {
    guard let first = chunks.first else { return 0 }
    let second = chunks.count > 1 ? chunks[1] : []
    let written = first.withUnsafeBytes { head in
      second.withUnsafeBytes { next in
        write(UnsafeRawBufferPointer(rebasing: head[offset...]), next)
      }
    }
    if written > 0 { consume(written) }
    return written
  }

  /// Marks the next `n` queued bytes as written (at most `count`).
  mutating func consume(_ n: Int) {
    var left = min(n, count)
    count -= left
    while left > 0, let first = chunks.first {
      let rest = first.count - offset
      if left < rest {
        offset += left
        return
      }
      left -= rest
      chunks.removeFirst()
      offset = 0
    }
    if chunks.isEmpty { offset = 0 }
  }

  /// Forgets everything queued.
  mutating func removeAll() {
    chunks.removeAll()
    offset = 0
    count = 0
  }
}
