import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// Whole-file reads and crash-safe writes over POSIX calls, shared by the disk cache, the
/// file loader and the CLI.
package enum FileIO {
  /// Why a write failed, with the system's words.
  package struct WriteError: Error, Sendable {
    /// What failed, e.g. "cannot create /x/y: Permission denied".
    package let message: String
    /// The errno behind it.
    package let code: Int32
  }

  /// Reads an open descriptor to its end, expecting `expected` bytes (a file can shrink while
  /// it is read; it is never read past the expected size). Nil on a read error.
  static func readAll(_ fd: Int32, expected: Int) -> [UInt8]? {
    var bytes = [UInt8](repeating: 0, count: max(0, expected))
    var filled = 0
    while filled < bytes.count {
      let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
      if n < 0 && errno == EINTR { continue }
      if n < 0 { return nil }
      if n == 0 { break }
      filled += n
    }
    return filled == bytes.count ? bytes : Array(bytes[0..<filled])
  }

  /// Writes `bytes` to a temporary file made from `temporaryTemplate` (which must end in
  /// XXXXXX and lie on the same file system), then renames it to `path`: readers see the old
  /// file or the whole new one, and a crash leaves at most the temporary file.
  package static func writeAtomically(
    _ bytes: [UInt8], to path: String, temporaryTemplate: String, mode: mode_t = 0o644
  ) throws(WriteError) {
    var template = PathBytes.bytes(temporaryTemplate).map { CChar(bitPattern: $0) } + [0]
    let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    guard fd >= 0 else {
      throw WriteError(
        message: "cannot create \(PathBytes.display(path)): \(lastError())", code: errno)
    }
    let temporary = PathBytes.string(template.dropLast().map { UInt8(bitPattern: $0) })
    var written = 0
    var failure: (text: String, code: Int32)?
    while written < bytes.count {
      let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else {
        failure = n == 0 ? ("no space written", ENOSPC) : (lastError(), errno)
        break
      }
      written += n
    }
    fchmod(fd, mode)
    if close(fd) != 0 && failure == nil { failure = (lastError(), errno) }
    if failure == nil,
      PathBytes.withCString(temporary, { from in PathBytes.withCString(path) { rename(from, $0) } })
        != 0
    {
      failure = (lastError(), errno)
    }
    if let failure {
      PathBytes.withCString(temporary) { _ = unlink($0) }
      throw WriteError(
        message: "cannot write \(PathBytes.display(path)): \(failure.text)", code: failure.code)
    }
  }

  private static func lastError() -> String { String(cString: strerror(errno)) }
}
