import CNetShim
import Dispatch
import Foundation
import ImagePipeline
import ThumbServer

/// `thumbd serve`: the daemon. This first version takes flags only; the config file,
/// environment variables, the session protocol, logs and socket activation come next (issue 4).
enum ServeCommand {
  static let usage = """
    thumbd serve: serve thumbnails over a Unix socket (and optionally TCP).

    Usage:
      thumbd serve [--socket PATH] [--socket-mode OCTAL] [--listen 127.0.0.1:PORT]
                   [--cache-dir DIR] [--memory-limit BYTES] [--disk-limit BYTES]
                   [--file-root DIR]... [--allow-private]

    Endpoints: GET /v1/thumbnail?url=&w=&h=&scale=&fit=&format=&quality=,
    GET /healthz, GET /metrics. Default socket: $XDG_RUNTIME_DIR/thumbd.sock,
    or /tmp/thumbd-UID.sock, mode 0660. SIGTERM or SIGINT stops accepting,
    finishes answered requests and exits.
    """

  static func run(_ arguments: [String]) async -> Int32 {
    let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"]
    var socketPath = runtime.map { $0 + "/thumbd.sock" } ?? "/tmp/thumbd-\(getuid()).sock"
    var socketMode: UInt32 = 0o660
    var listen: String?
    var cacheDirectory: String?
    var memoryLimit = 64 << 20
    var diskLimit = 1 << 30
    var fileRoots: [String] = []
    var allowPrivate = false
    var cursor = ArgumentCursor(arguments)
    do throws(ThumbnailCommand.UsageError) {
      while let argument = cursor.next() {
        switch argument.name {
        case "-h", "--help":
          print(usage)
          return 0
        case "--socket": socketPath = try cursor.value(for: argument)
        case "--socket-mode":
          let text = try cursor.value(for: argument)
          guard let mode = UInt32(text, radix: 8), mode <= 0o777 else {
            throw .init(message: "--socket-mode expects octal permissions such as 660")
          }
          socketMode = mode
        case "--listen": listen = try cursor.value(for: argument)
        case "--cache-dir": cacheDirectory = try cursor.value(for: argument)
        case "--memory-limit": memoryLimit = try cursor.integer(for: argument, in: 0...Int.max)
        case "--disk-limit": diskLimit = try cursor.integer(for: argument, in: 1...Int.max)
        case "--file-root": fileRoots.append(try cursor.value(for: argument))
        case "--allow-private": allowPrivate = true
        default: throw .init(message: "unknown option '\(argument.name)'")
        }
      }
    } catch {
      printError("thumbd serve: \(error.message)\nRun 'thumbd serve --help' for usage.")
      return 2
    }
    var schemes: Set<String> = ["http", "https"]
    if !fileRoots.isEmpty { schemes.insert("file") }
    let policy = SourcePolicy(
      allowedSchemes: schemes, allowPrivateAddresses: allowPrivate, allowLoopback: allowPrivate,
      fileRoots: fileRoots)
    do {
      let disk = try cacheDirectory.map { try DiskCache(directory: $0, sizeLimit: diskLimit) }
      let pipeline = ThumbnailPipeline(
        configuration: .init(
          dataLoader: SourceLoader(policy: policy), memoryCacheCostLimit: memoryLimit,
          diskCache: disk))
      let server = try HTTPServer(router: Router(thumbnails: ThumbnailRoute(pipeline: pipeline)))
      let unixSocket = ns_listen_unix(socketPath, socketMode, 1024)
      guard unixSocket >= 0 else {
        throw ServerError.system("listen on \(socketPath)", -unixSocket)
      }
      try server.listen(on: unixSocket)
      if let listen {
        let parts = listen.split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1]) else {
          printError("thumbd serve: --listen expects HOST:PORT")
          return 2
        }
        let tcp = ns_listen_tcp(String(parts[0]), port, 1024)
        guard tcp >= 0 else { throw ServerError.system("listen on \(listen)", -tcp) }
        try server.listen(on: tcp)
      }
      let signals = [SIGTERM, SIGINT].map { signal -> DispatchSourceSignal in
        Glibc.signal(signal, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signal)
        source.setEventHandler { server.stop() }
        source.resume()
        return source
      }
      server.start()
      printError("thumbd: serving on \(socketPath)" + (listen.map { " and \($0)" } ?? ""))
      await withCheckedContinuation { continuation in
        Thread.detachNewThread {
          server.wait()
          continuation.resume()
        }
      }
      unlink(socketPath)
      _ = signals
      return 0
    } catch {
      printError("thumbd serve: \(error)")
      return 1
    }
  }
}
