import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// What a file manager tells the cache when it moves, copies or deletes files (the freedesktop
/// `Cache1` calls), so thumbnails follow their files instead of being made again or left
/// behind.
extension FreedesktopCache {
  /// Most entries one folder move, copy or cleanup reads per flavor.
  package static let maxScannedEntries = 200_000

  /// `Delete`: removes every flavor's entry and the failure entry of each URI. Only inside
  /// folders that are folders: one replaced by a link is not followed (as writes refuse it),
  /// so a caller cannot have files outside the cache unlinked.
  package func delete(uris: [String]) {
    let flavors = Flavor.allCases.filter { isOwnFolder(directory + "/" + $0.rawValue) }
    let failures = isOwnFolder(directory + "/fail") && isOwnFolder(failureDirectory)
    for uri in uris {
      for flavor in flavors { unlink(path(forURI: uri, flavor: flavor)) }
      if failures { unlink(failureDirectory + "/" + Self.fileName(forURI: uri)) }
    }
  }

  /// Whether `folder` and the cache folder are directories, not links to one: the only
  /// folders entries are removed from or rewritten in.
  private func isOwnFolder(_ folder: String) -> Bool {
    [directory, folder].allSatisfy { path in
      var info = stat()
      return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }
  }

  /// `Move` and `Copy`: each `from[i]` was moved or copied to `to[i]` (both `file://` URIs).
  /// For a file, its entries are written again under the new URI, with the new file's
  /// `st_mtime`, when they were valid for what it is now: the same size and, for a move, the
  /// same modification time (a rename keeps it). For a folder, so is every entry whose URI lies
  /// below `from[i]`. A move then removes the old entries. Anything else is left alone.
  package func transfer(from: [String], to: [String], keepingOld: Bool) {
    for (old, new) in zip(from, to) {
      guard let newPath = Self.localPath(ofURI: new) else { continue }
      var info = stat()
      guard lstat(newPath, &info) == 0 else { continue }
      if info.st_mode & S_IFMT == S_IFDIR {
        let prefix = old.hasSuffix("/") ? old : old + "/"
        for flavor in Flavor.allCases {
          for (entry, uri) in entries(in: flavor, where: { $0.hasPrefix(prefix) }) {
            let target = (new.hasSuffix("/") ? new : new + "/") + uri.dropFirst(prefix.count)
            retarget(entry, to: target, flavor: flavor, keepingOld: keepingOld, exactTime: true)
          }
        }
      } else if info.st_mode & S_IFMT == S_IFREG {
        for flavor in Flavor.allCases {
          retarget(
            path(forURI: old, flavor: flavor), to: new, flavor: flavor, keepingOld: keepingOld,
            exactTime: !keepingOld)
        }
      }
      if !keepingOld { delete(uris: [old]) }
    }
  }

  /// `Cleanup`: removes every entry whose URI is one of `baseURIs` or lies below one, and whose
  /// file is gone or has changed since; with `since` > 0, also every entry whose `Thumb::MTime`
  /// is older than `since` or that has no URI.
  package func cleanup(baseURIs: [String], since: Int) {
    for flavor in Flavor.allCases {
      for (entry, uri) in entries(in: flavor, where: { _ in true }) {
        let keys = Self.texts(ofEntry: entry)
        if since > 0, let mtime = keys?["Thumb::MTime"].flatMap(Self.integer), mtime < since {
          unlink(entry)
          continue
        }
        let below = baseURIs.contains { base in
          uri == base || uri.hasPrefix(base.hasSuffix("/") ? base : base + "/")
        }
        guard below else { continue }
        guard let path = Self.localPath(ofURI: uri), let source = Self.source(atPath: path),
          Self.isValid(entry: entry, for: source, uris: [uri])
        else {
          unlink(entry)
          continue
        }
      }
    }
  }

  /// The entries of `flavor` (at most `maxScannedEntries`) whose `Thumb::URI` passes `test`.
  private func entries(
    in flavor: Flavor, where test: (String) -> Bool
  ) -> [(path: String, uri: String)] {
    let folder = directory + "/" + flavor.rawValue
    guard isOwnFolder(folder), let names = SystemFiles.list(folder) else { return [] }
    var found: [(String, String)] = []
    for name in names.prefix(Self.maxScannedEntries) where name.hasSuffix(".png") {
      let entry = folder + "/" + name
      if let uri = Self.texts(ofEntry: entry)?["Thumb::URI"], test(uri) {
        found.append((entry, uri))
      }
    }
    return found
  }

  /// Writes the entry at `entry` again as the thumbnail of `uri`, if it was a valid entry of
  /// the same size as that file now (and, with `exactTime`, of the same modification time).
  private func retarget(
    _ entry: String, to uri: String, flavor: Flavor, keepingOld: Bool, exactTime: Bool
  ) {
    guard let path = Self.localPath(ofURI: uri), let now = Self.source(atPath: path),
      let bytes = Self.entryBytes(entry),
      // From the bytes read, not the file again: one read, and the keys are of those bytes.
      let keys = PNGChunks.texts(
        limit: bytes.count,
        read: { offset, count in
          Array(bytes[offset..<min(bytes.count, offset + count)])
        }),
      let mtime = keys["Thumb::MTime"].flatMap(Self.integer),
      keys["Thumb::Size"].flatMap(Self.integer) ?? now.size == now.size,
      !exactTime || mtime == now.modified,
      let image = PNGChunks.removingTexts(fromPNG: bytes)
    else { return }
    let carried = keys.filter { !["Thumb::URI", "Thumb::MTime", "Software"].contains($0.key) }
      .sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    let source = Source(path: path, modified: now.modified, size: now.size, uri: uri)
    let target = self.path(forURI: uri, flavor: flavor)
    try? write(
      image, carried, for: source, to: target,
      making: [directory, directory + "/" + flavor.rawValue])
    if !keepingOld && target != entry { unlink(entry) }
  }

  /// The path of a local `file://` URI (no host, or `localhost`), percent-decoded; nil for
  /// any other URI.
  package static func localPath(ofURI uri: String) -> String? {
    guard let url = try? SourceURL(uri), url.scheme == "file",
      url.host.isEmpty || url.host == "localhost", let path = url.filePath, path.hasPrefix("/")
    else { return nil }
    return path
  }

  /// The whole entry at `path`: a regular file (not a link) of at most `maxEntryBytes`.
  static func entryBytes(_ path: String) -> [UInt8]? {
    withEntry(path) { fd, size in FileIO.readAll(fd, expected: size) }
  }
}
