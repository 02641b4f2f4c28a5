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
///   to an entry, whatever type it is said to be, except as a fallback when thumbd reads it
///   and has nothing to show (a camera RAW without an embedded preview);
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
  private let runs = Mutex<[String: [String: Int]]>([:])

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

  /// Runs so far, by entry (its file's name) and outcome: `made`, `failed` (the program
  /// exited with an error or a signal, or could not start), `timed_out`, `cancelled` (every
  /// caller dequeued it: its group was killed), `unusable_output` (no image, or one thumbd
  /// refuses).
  package var runCounts: [String: [String: Int]] { runs.withLock { $0 } }

  private func count(_ entry: ThumbnailerEntry, _ outcome: String) {
    let name = String(entry.source.split(separator: "/").last ?? "")
    runs.withLock { $0[name, default: [:]][outcome, default: 0] += 1 }
  }

  package var mediaTypes: [String] {
    installed.withLock { $0.byType.keys.filter { !native.contains($0) }.sorted() }
  }

  package func handles(_ mediaType: String) -> Bool { usable(for: mediaType) != nil }

  /// The entry that makes `mediaType`, unless thumbd decodes that type itself (or, for a
  /// fallback, whatever thumbd does).
  private func usable(for mediaType: String, evenIfNative: Bool = false)
    -> InstalledThumbnailers.Usable?
  {
    let type = mediaType.lowercased()
    return native.contains(type) && !evenIfNative ? nil : installed.withLock { $0.byType[type] }
  }

  package func thumbnail(
    path: String, flavors: Set<FreedesktopCache.Flavor>, mediaType: String,
    maker: DesktopThumbnailer
  ) async -> DesktopThumbnailer.Outcome? {
    guard let usable = usable(for: mediaType) else { return nil }
    return await run(path, flavors, mediaType, usable, maker, evenIfNative: false)
  }

  package func fallback(
    path: String, flavors: Set<FreedesktopCache.Flavor>, mediaType: String,
    maker: DesktopThumbnailer
  ) async -> DesktopThumbnailer.Outcome? {
    guard let usable = usable(for: mediaType, evenIfNative: true) else { return nil }
    return await run(path, flavors, mediaType, usable, maker, evenIfNative: true)
  }

  private func run(
    _ path: String, _ flavors: Set<FreedesktopCache.Flavor>, _ mediaType: String,
    _ usable: InstalledThumbnailers.Usable, _ maker: DesktopThumbnailer, evenIfNative: Bool
  ) async -> DesktopThumbnailer.Outcome? {
    let cancellation = SandboxCancellation()
    return await withTaskCancellationHandler {
      await SystemThread.run(name: "thumbd-delegate") { [self] in
        self.make(path, flavors, mediaType, usable, maker, cancellation, evenIfNative: evenIfNative)
      }
    } onCancel: {
      cancellation.cancel()
    }
  }

  /// As `fallback(path:flavors:mediaType:maker:)`, blocking the calling thread (the CLI's
  /// workers), with no cancellation but the deadline: for a file `maker` refused as
  /// unsupported (a type it does not read, a camera RAW without a preview, a video when its
  /// worker cannot run here).
  package func fallbackWaiting(
    path: String, flavors: Set<FreedesktopCache.Flavor>, mediaType: String,
    maker: DesktopThumbnailer
  ) -> DesktopThumbnailer.Outcome? {
    guard let usable = usable(for: mediaType, evenIfNative: true) else { return nil }
    return make(
      path, flavors, mediaType, usable, maker, SandboxCancellation(), evenIfNative: true)
  }

  /// The installed thumbnailers of this environment, run in a sandbox in the default work
  /// folder; or why there are none (no bubblewrap, or it cannot make a sandbox here).
  package static func installed(
    environment: [String: String], native: [String]
  ) -> Result<DesktopDelegation, UnusableReason> {
    guard let bwrap = Sandbox.findBubblewrap() else {
      return .failure(UnusableReason(text: "bubblewrap is not installed (the bubblewrap package)"))
    }
    let sandbox = Sandbox(
      bwrap: bwrap, workFolder: Sandbox.defaultWorkFolder(environment: environment))
    if let problem = sandbox.probe() { return .failure(UnusableReason(text: problem)) }
    return .success(
      DesktopDelegation(
        sandbox: sandbox, folders: InstalledThumbnailers.folders(environment: environment),
        native: native))
  }

  /// Why installed thumbnailers cannot be used here.
  package struct UnusableReason: Error {
    /// The reason, in words.
    package let text: String
  }

  /// The blocking part: open and check once, run the entry on that descriptor, decode what
  /// it wrote.
  func make(
    _ path: String, _ flavors: Set<FreedesktopCache.Flavor>, _ mediaType: String,
    _ usable: InstalledThumbnailers.Usable, _ maker: DesktopThumbnailer,
    _ cancellation: SandboxCancellation, evenIfNative: Bool = false
  ) -> DesktopThumbnailer.Outcome? {
    let opened: DesktopThumbnailer.Opened
    switch maker.open(path: path, flavors: flavors) {
    case .failure(let box): return box.outcome
    case .success(let file): opened = file
    }
    if maker.reads(opened) && !evenIfNative { return nil }
    // Not the file's fault: no fail entry.
    guard sandbox.canReach(path) else {
      return .refused(
        kind: "io",
        message:
          "thumbd runs as root and its sandbox as nobody, who cannot read this file: run thumbd as the file's user"
      )
    }
    let largest = opened.wanted[0]
    let descriptor = opened.descriptor
    let name = String(path.split(separator: "/").last ?? "")
    let (sandbox, thumbnailer) = (self.sandbox, maker.thumbnailer)
    let count = self.count
    return maker.make(opened, mediaType: mediaType.lowercased(), cancellation: nil) {
      () throws(ThumbnailError) in
      let output = usable.run(
        input: descriptor, name: name, size: largest.size, in: sandbox,
        outputLimit: Self.outputLimit, cancellation: cancellation)
      switch output.run.outcome {
      case .cancelled:
        count(usable.entry, "cancelled")
        throw .cancelled
      case .timedOut: count(usable.entry, "timed_out")
      case .exited(0): break
      default: count(usable.entry, "failed")
      }
      guard let bytes = output.bytes else {
        if output.run.outcome == .exited(0) { count(usable.entry, "unusable_output") }
        throw .corrupt(
          "\(usable.entry.source): \(output.problem ?? "no output")"
            + (output.run.messages.isEmpty ? "" : ": \(output.run.messages.prefix(200))"))
      }
      // The child's picture, decoded by thumbd under its limits and made into thumbd's own
      // PNG of the flavor's size: what is stored is never the child's bytes.
      let spec = ThumbnailSpec(width: largest.size, height: largest.size, format: .png)
      let made: Thumbnail
      do throws(ThumbnailError) {
        made = try thumbnailer.thumbnail(.bytes(bytes), spec: ValidSpec(spec))
      } catch {
        // Whatever is wrong with it (not an image, damaged, over the pixel limits), the
        // thumbnailer's picture is unusable: the file's thumbnail failed.
        count(usable.entry, "unusable_output")
        throw .corrupt("\(usable.entry.source) wrote an unusable image: \(error.message)")
      }
      count(usable.entry, "made")
      return DesktopThumbnailer.Made(png: made.data, size: nil)
    }
  }
}
