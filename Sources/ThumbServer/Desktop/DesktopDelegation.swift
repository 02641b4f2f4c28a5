import ImagePipeline
import Sandbox
import Synchronization
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// The desktop's thumbnails of the types thumbd does not decode, made by the installed
/// `*.thumbnailer` entries (issue 53), each run in the `Sandbox`, never in thumbd's process.
///
/// Rules kept here:
/// - a type thumbd decodes stays native: a file whose content thumbd reads is never handed
///   to an entry, whatever type it is said to be;
/// - the child gets the file as one open descriptor, the same one thumbd checked;
/// - its output is untrusted: read with a byte bound, decoded by thumbd's own decoder under
///   its pixel limits, and written by thumbd's writer (keys, 0600, atomic rename); the
///   child's bytes never reach the cache as they are;
/// - a child that fails, times out or writes what does not decode gets a failure entry;
///   a cancelled one does not.
package final class DesktopDelegation: DesktopDelegate {
  /// The sandbox children run in.
  package let sandbox: Sandbox
  /// The folders entries are read from, in order.
  package let folders: [String]
  /// The largest output read back from a child.
  package static let outputLimit = 16 << 20
  private let installed: Mutex<InstalledThumbnailers>
  private let native: Set<String>

  /// Entries from `folders`, run in `sandbox`; the types in `native` (thumbd's own) are never
  /// delegated.
  package init(sandbox: Sandbox, folders: [String], native: [String]) {
    self.sandbox = sandbox
    self.folders = folders
    self.native = Set(native.map { $0.lowercased() })
    installed = Mutex(InstalledThumbnailers.load(folders: folders))
  }

  /// Reads the entries again (their folders changed, or SIGHUP).
  package func reload() {
    let fresh = InstalledThumbnailers.load(folders: folders)
    installed.withLock { $0 = fresh }
  }

  /// Entry files not used, with the reason, for the log.
  package var skipped: [(source: String, reason: String)] { installed.withLock { $0.skipped } }

  package var mediaTypes: [String] {
    installed.withLock { $0.byType.keys.filter { !native.contains($0) }.sorted() }
  }

  package func handles(_ mediaType: String) -> Bool {
    let type = mediaType.lowercased()
    return !native.contains(type) && installed.withLock { $0.byType[type] != nil }
  }

  package func thumbnail(
    path: String, flavors: Set<FreedesktopCache.Flavor>, mediaType: String,
    maker: DesktopThumbnailer
  ) async -> DesktopThumbnailer.Outcome? {
    guard let usable = installed.withLock({ $0.byType[mediaType.lowercased()] }) else {
      return nil
    }
    let cancellation = SandboxCancellation()
    return await withTaskCancellationHandler {
      await SystemThread.run(name: "thumbd-delegate") { [self] in
        self.make(path, flavors, mediaType, usable, maker, cancellation)
      }
    } onCancel: {
      cancellation.cancel()
    }
  }

  /// The blocking part: open and check once, run the entry on that descriptor, decode what
  /// it wrote.
  func make(
    _ path: String, _ flavors: Set<FreedesktopCache.Flavor>, _ mediaType: String,
    _ usable: InstalledThumbnailers.Usable, _ maker: DesktopThumbnailer,
    _ cancellation: SandboxCancellation
  ) -> DesktopThumbnailer.Outcome? {
    let opened: DesktopThumbnailer.Opened
    switch maker.open(path: path, flavors: flavors) {
    case .failure(let box): return box.outcome
    case .success(let file): opened = file
    }
    if DesktopThumbnailer.isNative(opened) { return nil }
    let largest = opened.wanted[0]
    let descriptor = opened.descriptor
    let name = String(path.split(separator: "/").last ?? "")
    let (sandbox, thumbnailer) = (self.sandbox, maker.thumbnailer)
    return maker.make(opened, mediaType: mediaType.lowercased(), cancellation: nil) {
      () throws(ThumbnailError) in
      let output = usable.run(
        input: descriptor, name: name, size: largest.size, in: sandbox,
        outputLimit: Self.outputLimit, cancellation: cancellation)
      if output.run.outcome == .cancelled { throw .cancelled }
      guard let bytes = output.bytes else {
        throw .corrupt(
          "\(usable.entry.source): \(output.problem ?? "no output")"
            + (output.run.messages.isEmpty ? "" : ": \(output.run.messages.prefix(200))"))
      }
      // The child's picture, decoded by thumbd under its limits and made into thumbd's own
      // PNG of the flavor's size: what is stored is never the child's bytes.
      let spec = ThumbnailSpec(width: largest.size, height: largest.size, format: .png)
      let made = try thumbnailer.thumbnail(of: bytes, spec: spec)
      return (made.data, nil)
    }
  }
}
