import Foundation

/// Wakes a waiting thread when a file is made or renamed into a folder or one of its direct
/// subfolders (inotify), so a test watching another process's files waits on the kernel
/// instead of sleeping between looks.
final class FolderWatch {
  private let fd: Int32
  private let root: String
  private var watched: Set<String> = []

  /// Watches `root`, which must exist, and the subfolders it has or gets.
  init(_ root: String) {
    self.root = root
    fd = inotify_init1(Int32(IN_CLOEXEC))
    precondition(fd >= 0, "inotify_init1 failed")
    addWatches()
  }

  deinit { close(fd) }

  /// The files (not folders) in the root's subfolders whose names end with `suffix`. Watches
  /// any subfolder it has not seen first, so a file renamed into a new one between two looks
  /// is counted by the look after the watch (the watch is made before the folder is read).
  func count(suffix: String) -> Int {
    addWatches()
    var found = 0
    for folder in watched where folder != root {
      found +=
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
        .filter { $0.hasSuffix(suffix) }.count
    }
    return found
  }

  /// Blocks until something changes below the root, or `milliseconds` pass (for a condition no
  /// file event signals, such as the writer's end), and drains the events.
  func next(milliseconds: Int32) {
    var target = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&target, 1, milliseconds) > 0 else { return }
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    _ = read(fd, &buffer, buffer.count)
  }

  private func addWatches() {
    let mask = UInt32(IN_CREATE | IN_MOVED_TO)
    if watched.insert(root).inserted { inotify_add_watch(fd, root, mask) }
    for name in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
      let folder = root + "/" + name
      var isFolder: ObjCBool = false
      guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder),
        isFolder.boolValue, watched.insert(folder).inserted
      else { continue }
      inotify_add_watch(fd, folder, mask)
    }
  }
}
