/// Entry points for the fuzz targets (`Sources/FuzzTargets`) into parsers that are internal
/// here. `package`: visible to this package's targets only, never to a consumer.
package enum PipelineFuzzing {
  /// What a disk cache file decodes to, under `key`: the entry's parts, or nil when it is
  /// refused (corrupt, or another key's).
  package static func diskEntry(
    _ bytes: [UInt8], key: String
  ) -> (metadata: [UInt8], payload: [UInt8])? {
    guard case .entry(let metadata, let payload) = DiskCacheEntry.decode(bytes, key: key) else {
      return nil
    }
    return (metadata, payload)
  }

  /// A disk cache file for the parts.
  package static func encodeDiskEntry(key: String, metadata: [UInt8], payload: [UInt8]) -> [UInt8] {
    DiskCacheEntry.encode(key: key, metadata: metadata, payload: payload)
  }

  /// A stored placeholder read back, and the bytes it would be stored as.
  package static func placeholder(_ bytes: [UInt8]) -> (Placeholder, [UInt8])? {
    Placeholder(encoded: bytes).map { ($0, $0.encoded) }
  }

  /// The thumbnail a disk entry's parts describe, if they describe one.
  package static func thumbnail(metadata: [UInt8], payload: [UInt8]) -> Thumbnail? {
    ThumbnailDiskFormat.thumbnail(metadata: metadata, payload: payload)
  }

  /// The source version at the start of a disk entry's metadata bytes, and its length.
  package static func sourceVersion(_ bytes: [UInt8]) -> (version: SourceVersion, length: Int)? {
    SourceVersionCoding.decode(bytes[...])
  }

  /// The metadata bytes of a source version.
  package static func encodeSourceVersion(_ version: SourceVersion) -> [UInt8] {
    SourceVersionCoding.encode(version)
  }
}
