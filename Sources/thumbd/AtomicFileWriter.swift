import ImagePipeline

#if canImport(Glibc)
  import Glibc
#endif

/// Writes a file so readers see either the old file or the whole new one, never a part.
enum AtomicFileWriter {
  /// Writes `bytes` to a temporary file beside `path`, then renames it into place.
  static func write(_ bytes: [UInt8], to path: String) throws(ThumbnailError) {
    var template = Array((path + ".tmp-XXXXXX").utf8CString)
    let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    guard fd >= 0 else { throw .io("cannot create \(path): \(lastError())") }
    let temporary = String(cString: template.map { UInt8(bitPattern: $0) })
    var written = 0
    let ok = bytes.withUnsafeBytes { raw -> Bool in
      while written < raw.count {
        let n = Glibc.write(fd, raw.baseAddress! + written, raw.count - written)
        if n < 0 {
          if errno == EINTR { continue }
          return false
        }
        written += n
      }
      return true
    }
    let error = ok ? "" : lastError()
    fchmod(fd, 0o644)
    close(fd)
    guard ok else {
      unlink(temporary)
      throw .io("cannot write \(path): \(error)")
    }
    guard rename(temporary, path) == 0 else {
      let message = lastError()
      unlink(temporary)
      throw .io("cannot write \(path): \(message)")
    }
  }

  private static func lastError() -> String { String(cString: strerror(errno)) }
}
