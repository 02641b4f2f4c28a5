import ImagePipeline

extension FuzzTarget {
  /// Disk cache files: whatever the cache directory holds is read as an attack.
  static let diskEntry = FuzzTarget(
    name: "disk-entry",
    covers:
      "disk cache entries: any file decodes or is refused; an entry built from the input's parts decodes back to exactly them, and no single changed byte makes it decode to other parts; a stored placeholder decodes only to one that stores as the same bytes",
    maxLength: 65_536
  ) { bytes in
    if let parts = PipelineFuzzing.diskEntry(bytes, key: "k") {
      _ = PipelineFuzzing.thumbnail(metadata: parts.metadata, payload: parts.payload)
    }
    if let (placeholder, stored) = PipelineFuzzing.placeholder(bytes) {
      require(stored == bytes, "a placeholder decoded from bytes it would not store")
      require(placeholder.thumbHash.count <= 32, "a hash of \(placeholder.thumbHash.count) bytes")
    }
    // The input's first two bytes split the rest into key, metadata and payload.
    guard bytes.count >= 2 else { return }
    let body = Array(bytes.dropFirst(2))
    let keyEnd = min(body.count, Int(bytes[0]))
    let metaEnd = min(body.count, keyEnd + Int(bytes[1]))
    let key = text(Array(body[..<keyEnd]))
    let metadata = Array(body[keyEnd..<metaEnd])
    let payload = Array(body[metaEnd...])
    let entry = PipelineFuzzing.encodeDiskEntry(key: key, metadata: metadata, payload: payload)
    let decoded = PipelineFuzzing.diskEntry(entry, key: key)
    require(
      decoded?.metadata == metadata && decoded?.payload == payload, "entry does not read back")
    var changed = entry
    let position = (Int(bytes[0]) << 8 | Int(bytes[1])) % changed.count
    changed[position] ^= 0x01
    if let other = PipelineFuzzing.diskEntry(changed, key: key) {
      require(
        other.metadata == metadata && other.payload == payload,
        "byte \(position) changed and the entry still decoded, to other parts")
    }
  }
}
