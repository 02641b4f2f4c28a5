/// The bytes of a `SourceVersion` in a disk cache entry's metadata. Decoding is total: any
/// byte string gives a version or nil, never a trap (the cache directory is untrusted), and
/// strict: only the one encoding of a version decodes (no ignored bytes, no text that is not
/// UTF-8), so what is read is exactly what was written (found by fuzzing).
enum SourceVersionCoding {
  /// Validators longer than this are not kept (an origin's `ETag` could fill a whole head).
  static let maxValidatorBytes = 1024

  static func encode(_ version: SourceVersion) -> [UInt8] {
    var out: [UInt8] = []
    switch version.validator {
    case .none:
      out.append(0)
    case .file(let stamp):
      out.append(1)
      for value in [
        stamp.device, stamp.inode, UInt64(bitPattern: stamp.size),
        UInt64(bitPattern: stamp.modifiedNanoseconds), UInt64(bitPattern: stamp.changedNanoseconds),
      ] {
        append(value, to: &out)
      }
    case .http(let etag, let modified):
      out.append(2)
      for text in [etag, modified] {
        // Longer ones are never kept by the fetcher; cut, they would not be UTF-8.
        let bytes = text.flatMap { $0.utf8.count <= maxValidatorBytes ? Array($0.utf8) : nil }
        out.append(bytes == nil ? 0 : 1)
        append(UInt16(bytes?.count ?? 0), to: &out)
        out += bytes ?? []
      }
    }
    append(version.digest, to: &out)
    let f = version.freshness
    for value in [f.freshUntil, f.lifetime, f.staleWhileRevalidate, f.staleIfError] {
      append(value.bitPattern, to: &out)
    }
    out.append((f.noStore ? 1 : 0) | (f.isPrivate ? 2 : 0) | (version.lastModified == nil ? 0 : 4))
    append((version.lastModified ?? 0).bitPattern, to: &out)
    return out
  }

  /// The version at the start of `bytes` and how many bytes it took, or nil.
  static func decode(_ bytes: ArraySlice<UInt8>) -> (version: SourceVersion, length: Int)? {
    var reader = ByteReader(bytes)
    guard let kind = reader.byte() else { return nil }
    let validator: SourceValidator
    switch kind {
    case 0:
      validator = .none
    case 1:
      guard let device = reader.uint64(), let inode = reader.uint64(), let size = reader.uint64(),
        let modified = reader.uint64(), let changed = reader.uint64()
      else { return nil }
      validator = .file(
        FileStamp(
          device: device, inode: inode, size: Int64(bitPattern: size),
          modifiedNanoseconds: Int64(bitPattern: modified),
          changedNanoseconds: Int64(bitPattern: changed)))
    case 2:
      var texts: [String?] = []
      for _ in 0..<2 {
        guard let present = reader.byte(), present <= 1, let count = reader.uint16(),
          Int(count) <= maxValidatorBytes, present == 1 || count == 0,
          let bytes = reader.take(Int(count))
        else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.utf8.elementsEqual(bytes) else { return nil }
        texts.append(present == 1 ? text : nil)
      }
      validator = .http(etag: texts[0], lastModified: texts[1])
    default:
      return nil
    }
    guard let digest = reader.uint64(), let freshUntil = reader.double(),
      let lifetime = reader.double(), let swr = reader.double(), let sie = reader.double(),
      let flags = reader.byte(), flags < 8, let modified = reader.double(),
      [lifetime, swr, sie].allSatisfy({ $0.isFinite && $0 >= 0 }), !freshUntil.isNaN,
      modified.isFinite, flags & 4 != 0 || modified.bitPattern == 0
    else { return nil }
    let freshness = Freshness(
      freshUntil: freshUntil, lifetime: lifetime, staleWhileRevalidate: swr, staleIfError: sie,
      noStore: flags & 1 != 0, isPrivate: flags & 2 != 0)
    let version = SourceVersion(
      validator: validator, digest: digest, freshness: freshness,
      lastModified: flags & 4 != 0 ? modified : nil)
    return (version, reader.offset)
  }

  private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { out += $0 }
  }
}
