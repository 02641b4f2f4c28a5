import CBus
import ImagePipeline
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// The desktop's thumbnail services on D-Bus: `org.freedesktop.thumbnails.Thumbnailer1`
/// (a `ThumbnailerService`) and `org.freedesktop.thumbnails.Cache1` (the `FreedesktopCache`
/// operations), over sd-bus on a thread of its own (CBus). Calls are answered on that
/// thread, and the cache lookups they make run there, never on the HTTP loop or the
/// cooperative pool.
package final class DesktopBus: Sendable {
  /// The Thumbnailer1 requests.
  package let service: ThumbnailerService
  private let connection: Connection
  private let context: Unmanaged<Handlers>
  /// `GetSupported`'s types now: the native ones, then those an installed thumbnailer makes.
  private let supportedTypes: @Sendable () -> [String]

  /// The sd-bus connection: written before the bus thread starts, freed after it ends.
  private final class Connection: @unchecked Sendable {
    // @unchecked: `bus` is set once, before any thread but the opener can see it.
    var bus: OpaquePointer?
    let finished = ConditionLock()
    var running = false
  }

  /// What the C handlers reach through their context pointer.
  private final class Handlers: Sendable {
    let service: ThumbnailerService
    let cache: FreedesktopCache
    init(service: ThumbnailerService, cache: FreedesktopCache) {
      self.service = service
      self.cache = cache
    }
  }

  /// Signals queued on the bus for its thread to send.
  private struct Signals: ThumbnailerSignals {
    let connection: Connection

    func started(_ handle: UInt32, to caller: String) {
      guard let bus = connection.bus else { return }
      cb_emit_started(bus, caller, handle)
    }

    func ready(_ handle: UInt32, uris: [String], to caller: String) {
      guard let bus = connection.bus else { return }
      _ = withStrings(uris) { cb_emit_ready(bus, caller, handle, $0) }
    }

    func error(
      _ handle: UInt32, uris: [String], code: ThumbnailerService.ErrorCode, message: String,
      to caller: String
    ) {
      guard let bus = connection.bus else { return }
      _ = withStrings(uris) { cb_emit_error(bus, caller, handle, $0, code.rawValue, message) }
    }

    func finished(_ handle: UInt32, to caller: String) {
      guard let bus = connection.bus else { return }
      cb_emit_finished(bus, caller, handle)
    }
  }

  /// Connects to `address` (empty: the session bus), takes the two well-known names, and
  /// serves `jobs`' cache. `window` Thumbnailer1 jobs of each kind run at once. Nothing is
  /// answered until `start()`. Throws `StartupError` naming why it cannot (no bus, another
  /// program owns the names).
  package init(address: String, jobs: DesktopJobs, window: Int) throws {
    let connection = Connection()
    let service = ThumbnailerService(
      signals: Signals(connection: connection), work: .init(jobs: jobs), window: window)
    let handlers = Handlers(service: service, cache: jobs.thumbnailer.cache)
    let context = Unmanaged.passRetained(handlers)
    let supportedTypes: @Sendable () -> [String] = {
      jobs.thumbnailer.mediaTypes + (jobs.delegate?.mediaTypes ?? [])
    }
    let mimeTypes = supportedTypes()
    var error = [CChar](repeating: 0, count: 512)
    let bus = withStrings(Array(repeating: "file", count: mimeTypes.count)) { schemes in
      withStrings(mimeTypes) { types in
        withStrings(ThumbnailerService.flavors) { flavors in
          var options = cb_options(
            address: nil, request_names: 1, schemes: schemes, mime_types: types,
            flavors: flavors)
          var table = Self.handlers(context.toOpaque())
          return address.withCString { text in
            options.address = address.isEmpty ? nil : text
            return cb_open(&options, &table, &error, error.count)
          }
        }
      }
    }
    guard let bus else {
      context.release()
      let reason = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
      throw StartupError(message: "dbus: \(reason)")
    }
    connection.bus = bus
    self.connection = connection
    self.context = context
    self.service = service
    self.supportedTypes = supportedTypes
  }

  /// Answers `GetSupported` with the types as they are now: after the installed thumbnailers
  /// were read again (their folders changed, or SIGHUP), a file manager that asks sees them.
  package func refreshSupported() {
    guard let bus = connection.bus else { return }
    let mimeTypes = supportedTypes()
    _ = withStrings(Array(repeating: "file", count: mimeTypes.count)) { schemes in
      withStrings(mimeTypes) { types in cb_set_supported(bus, schemes, types) }
    }
  }

  deinit {
    stop()
    if let bus = connection.bus { cb_close(bus) }
    context.release()
  }

  /// This connection's unique name on the bus.
  package var uniqueName: String {
    guard let bus = connection.bus else { return "" }
    return String(cString: cb_unique_name(bus))
  }

  /// Signals dropped because the queue to the bus was full.
  package var droppedSignals: UInt64 { connection.bus.map { cb_dropped_signals($0) } ?? 0 }

  /// Starts the bus thread; `onEnd` is called if the connection ends by itself (the bus went
  /// away), with the reason.
  package func start(onEnd: @escaping @Sendable (String) -> Void = { _ in }) {
    guard connection.bus != nil else { return }
    let connection = connection
    connection.finished.lock()
    connection.running = true
    connection.finished.unlock()
    SystemThread.detach(name: "dbus") {
      let result = cb_run(connection.bus)
      connection.finished.lock()
      connection.running = false
      connection.finished.broadcast()
      connection.finished.unlock()
      if result < 0 { onEnd("the bus connection ended (errno \(-result))") }
    }
  }

  /// Ends every request (`Finished`), sends what is queued and stops the bus thread; returns
  /// when it has.
  package func stop() {
    service.stop()
    guard let bus = connection.bus else { return }
    cb_stop(bus)
    connection.finished.lock()
    while connection.running { connection.finished.wait() }
    connection.finished.unlock()
  }

  private static func handlers(_ context: UnsafeMutableRawPointer) -> cb_handlers {
    cb_handlers(
      context: context,
      queue: { context, sender, uris, mimes, flavor, scheduler, unqueue in
        let handlers = Unmanaged<Handlers>.fromOpaque(context!).takeUnretainedValue()
        return handlers.service.queue(
          caller: String(cString: sender!), uris: strings(uris), mediaTypes: strings(mimes),
          flavor: String(cString: flavor!), scheduler: String(cString: scheduler!),
          unqueue: unqueue)
      },
      queued: { context, handle in
        Unmanaged<Handlers>.fromOpaque(context!).takeUnretainedValue().service.queued(handle)
      },
      dequeue: { context, sender, handle in
        Unmanaged<Handlers>.fromOpaque(context!).takeUnretainedValue().service.dequeue(
          handle, caller: String(cString: sender!))
      },
      cache: { context, op, first, second, since in
        let cache = Unmanaged<Handlers>.fromOpaque(context!).takeUnretainedValue().cache
        switch op {
        case CB_CACHE_MOVE:
          cache.transfer(from: strings(first), to: strings(second), keepingOld: false)
        case CB_CACHE_COPY:
          cache.transfer(from: strings(first), to: strings(second), keepingOld: true)
        case CB_CACHE_DELETE: cache.delete(uris: strings(first))
        default: cache.cleanup(baseURIs: strings(first), since: Int(since))
        }
      },
      peer_gone: { context, name in
        Unmanaged<Handlers>.fromOpaque(context!).takeUnretainedValue().service.callerLeft(
          String(cString: name!))
      })
  }
}

/// The strings of a call's array.
private func strings(_ list: cb_strings) -> [String] {
  (0..<list.count).map { String(cString: list.items[$0]!) }
}

/// Runs `body` with `values` as a C array of strings, valid during the call.
private func withStrings<T>(_ values: [String], _ body: (cb_strings) -> T) -> T {
  let copies: [UnsafeMutablePointer<CChar>?] = values.map { strdup($0) }
  defer { for copy in copies { free(copy) } }
  let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } }
  return pointers.withUnsafeBufferPointer { buffer in
    body(cb_strings(items: buffer.baseAddress, count: buffer.count))
  }
}
