import Foundation
import LoadHarness

#if canImport(Glibc)
  import Glibc
#endif

/// thumbload: scrolling clients against thumbd or the library, with end-to-end checks.
let usage = """
  thumbload: simulate scrolling clients against thumbd and check every shown thumbnail.

  Usage:
    thumbload [--scenario scroll|stampede|grid-sizes|soak[,...]] [--duration SECONDS]
              [--json FILE] [--html FILE] [--target TARGET] [options]

  With no --target, thumbload starts its own origin and its own thumbd (the one beside it)
  on a temporary socket, runs, and cleans up. Targets:
    daemon               that daemon, each client a session (default)
    http                 that daemon, each client plain HTTP requests (GET /v1/thumbnail)
    socket:PATH          a running daemon's socket, sessions   http:PATH  the same over HTTP
    library              the ImagePipeline library in this process, as a session
    library-slots        the library as an app uses it: ImageSlot cells, PrefetchCoordinator

  Scenario options:
    --lists N            virtual lists, one client each (default 4)
    --items N            items per list (default 400)
    --slots N            cells per viewport (default 12)
    --size PX            thumbnail box (default 128)
    --prefetch N         items announced ahead of the scroll (default 24; 0 disables)
    --prefetch-flood N   another client keeps N unrelated items in prefetch (default 0)
    --cache cold|warm|index
                         warm loads every item once before measuring; index loads each
                         once at 40 px, so the placeholder index knows every source and
                         every load of the run is still a miss (default cold)
    --preview            loads ask for a preview (an early picture) ahead of the image
    --stampede-clients N clients asking for one cold item at once (default 50)
    --seed N             seed for scrolling and the origin (default 1)
  Origin options:
    --latency-ms MS      origin latency (default 20)   --jitter-ms MS  plus up to (default 30)
    --bandwidth BYTES/S  per response (default unlimited)
    --error-rate R       share of failing requests: 503, reset, truncated (default 0)
    --source WxH         source image size (default 800x600)   --png  PNG sources
    --progressive        progressive JPEG sources (DC scans first)
    --mutate RATE        items change RATE times a second (seeded); images carry their
                         revision, the origin sends ETag and max-age; a shown image whose
                         revision was superseded more than max-age + --stale-slack before
                         its load was asked for is a stale delivery
    --max-age SECONDS    the origin's Cache-Control max-age (default 1 with --mutate)
    --stale-slack S      seconds past max-age an old revision may still show (default 1)
  Gates (exit status 1 when one fails; wrong and stale deliveries always gate):
    --max-p95-ms MS      latency P95 of shown images
    --max-ttv-p95-ms MS  time-to-visible P95
    --origin-url T       use another origin: T is a URL with {item}, serving images
                         made by 'thumbload generate' (origin fetches are then not counted)
  Other:
    --thumbd PATH        the thumbd binary to start   --quiet  no progress bar

  thumbload generate DIR --items N [--source WxH] [--png]
    writes item images 0..N-1 as DIR/N.jpg (or .png) for an origin of your own.
  """

/// Everything the command line said.
struct Settings {
  var options = RunOptions()
  var behaviour = OriginBehaviour()
  var jsonPath: String?
  var htmlPath: String?
  var targetSpec = "daemon"
  var thumbdPath: String?
  var mutateRate = 0.0
  var maxP95: Double?
  var maxTTV: Double?
  var quiet = false
  var originTemplate: String?
}

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("thumbload: \(message)\nRun 'thumbload --help'.\n".utf8))
  exit(2)
}

func parse(_ list: [String]) -> Settings {
  var settings = Settings()
  var arguments = list[...]
  func value(_ name: String) -> String {
    guard let next = arguments.popFirst() else { fail("\(name) needs a value") }
    return next
  }
  func number(_ name: String) -> Double {
    guard let parsed = Double(value(name)), parsed >= 0 else { fail("\(name) needs a number") }
    return parsed
  }
  func integer(_ name: String) -> Int {
    guard let parsed = Int(value(name)), parsed >= 0 else { fail("\(name) needs a whole number") }
    return parsed
  }
  while let argument = arguments.popFirst() {
    switch argument {
    case "-h", "--help":
      print(usage)
      exit(0)
    case "--scenario":
      settings.options.scenarios = value(argument).split(separator: ",").map { name in
        guard let scenario = Scenario(rawValue: String(name)) else {
          fail("unknown scenario '\(name)'")
        }
        return scenario
      }
    case "--duration": settings.options.duration = number(argument)
    case "--json": settings.jsonPath = value(argument)
    case "--html": settings.htmlPath = value(argument)
    case "--target": settings.targetSpec = value(argument)
    case "--lists": settings.options.lists = max(1, integer(argument))
    case "--items": settings.options.items = max(1, integer(argument))
    case "--slots": settings.options.slots = max(1, integer(argument))
    case "--size": settings.options.size = max(1, integer(argument))
    case "--prefetch": settings.options.prefetchWindow = integer(argument)
    case "--prefetch-flood": settings.options.prefetchFlood = integer(argument)
    case "--cache":
      settings.options.cache = value(argument)
      guard ["cold", "warm", "index"].contains(settings.options.cache) else {
        fail("--cache is cold, warm or index")
      }
    case "--stampede-clients": settings.options.stampedeClients = max(1, integer(argument))
    case "--seed": settings.options.seed = UInt64(integer(argument))
    case "--latency-ms": settings.behaviour.latencyMs = number(argument)
    case "--jitter-ms": settings.behaviour.jitterMs = number(argument)
    case "--bandwidth": settings.behaviour.bandwidth = integer(argument)
    case "--error-rate": settings.behaviour.errorRate = min(1, number(argument))
    case "--source":
      let parts = value(argument).split(separator: "x").compactMap { Int($0) }
      guard parts.count == 2, parts.allSatisfy({ $0 >= 32 && $0 <= 8192 }) else {
        fail("--source expects WxH, 32...8192 each")
      }
      (settings.behaviour.width, settings.behaviour.height) = (parts[0], parts[1])
    case "--png": settings.behaviour.png = true
    case "--progressive": settings.behaviour.progressive = true
    case "--preview": settings.options.preview = true
    case "--mutate": settings.mutateRate = max(0, number(argument))
    case "--max-age": settings.behaviour.maxAge = max(0, integer(argument))
    case "--stale-slack": settings.options.staleSlack = max(0, number(argument))
    case "--thumbd": settings.thumbdPath = value(argument)
    case "--max-p95-ms": settings.maxP95 = number(argument)
    case "--max-ttv-p95-ms": settings.maxTTV = number(argument)
    case "--quiet": settings.quiet = true
    case "--origin-url":
      let template = value(argument)
      guard template.contains("{item}") else { fail("--origin-url needs {item} in it") }
      settings.originTemplate = template
    default: fail("unknown option '\(argument)'")
    }
  }
  return settings
}

/// The progress line: a bar while running on a terminal, a line every 5 s otherwise.
func progressPrinter(total: Double) -> @Sendable (Double, Measurements) -> Void {
  let interactive = isatty(STDOUT_FILENO) != 0
  return { elapsed, measurements in
    let fraction = min(1, elapsed / max(total, 0.001))
    let filled = Int(fraction * 30)
    let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled)
    let text =
      "[\(bar)] \(String(format: "%5.1f", elapsed))s  \(measurements.loads) loads  "
      + "\(measurements.images) shown  \(measurements.wrongDeliveries) wrong  "
      + "\(measurements.staleDeliveries) stale"
    if interactive {
      // One write(2) straight to the terminal: no stdio buffer to flush.
      let line = Array(("\r" + text).utf8)
      _ = line.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
    } else if Int(elapsed * 2) % 10 == 0 {
      print(text)
    }
  }
}

/// `thumbload generate DIR --items N [--source WxH] [--png]`.
func generate(_ list: [String]) -> Int32 {
  guard let directory = list.first else { fail("generate needs a directory") }
  let settings = parse(Array(list.dropFirst()))
  let behaviour = settings.behaviour
  do {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    for item in 0..<settings.options.items {
      let bytes = try ItemImage.encoded(
        item: item, width: behaviour.width, height: behaviour.height, png: behaviour.png)
      let path = "\(directory)/\(item).\(behaviour.png ? "png" : "jpg")"
      try Data(bytes).write(to: URL(fileURLWithPath: path))
    }
    print("thumbload: wrote \(settings.options.items) images to \(directory)")
    return 0
  } catch {
    FileHandle.standardError.write(Data("thumbload: \(error)\n".utf8))
    return 1
  }
}

if CommandLine.arguments.dropFirst().first == "generate" {
  exit(generate(Array(CommandLine.arguments.dropFirst(2))))
}

let settings = parse(Array(CommandLine.arguments.dropFirst()))
let options = settings.options
let status: Int32
do {
  // Every list's items may change (lists take items from 0 up, options.items each).
  let mutations =
    settings.mutateRate > 0
    ? Mutations(
      rate: settings.mutateRate, items: 0..<(max(3, options.lists) * options.items),
      seed: options.seed) : nil
  let synthetic =
    settings.originTemplate == nil
    ? try SyntheticOrigin(behaviour: settings.behaviour, seed: options.seed, mutations: mutations)
    : nil
  defer { synthetic?.stop() }
  let origin: any ImageOrigin = synthetic ?? ExternalOrigin(template: settings.originTemplate!)
  var daemon: DaemonProcess?
  let target: any LoadTarget
  switch settings.targetSpec {
  case "daemon", "http":
    guard let binary = settings.thumbdPath ?? DaemonProcess.siblingBinary() else {
      fail("no thumbd beside thumbload; give --thumbd PATH")
    }
    daemon = try DaemonProcess(binary: binary)
    target =
      settings.targetSpec == "http"
      ? HTTPTarget(socket: daemon!.socket) : DaemonTarget(socket: daemon!.socket)
  case "library":
    target = LibraryTarget()
  case "library-slots":
    target = SlotsTarget()
  case let spec where spec.hasPrefix("socket:"):
    target = DaemonTarget(socket: String(spec.dropFirst("socket:".count)))
  case let spec where spec.hasPrefix("http:"):
    target = HTTPTarget(socket: String(spec.dropFirst("http:".count)))
  default:
    fail("--target is daemon, http, socket:PATH, http:PATH, library or library-slots")
  }
  defer { daemon?.stop() }
  let runner = Runner(
    target: target, options: options, origin: origin,
    progress: settings.quiet ? nil : progressPrinter(total: options.duration))
  let report = try await runner.run()
  if isatty(STDOUT_FILENO) != 0 && !settings.quiet { print("") }
  print(report.summary())
  if let jsonPath = settings.jsonPath {
    try report.json().write(to: URL(fileURLWithPath: jsonPath))
  }
  if let htmlPath = settings.htmlPath {
    try Data(HTMLReport.render(report).utf8).write(to: URL(fileURLWithPath: htmlPath))
  }
  let gates = Gates(maxLatencyP95Ms: settings.maxP95, maxTimeToVisibleP95Ms: settings.maxTTV)
  let failures = gates.failures(of: report)
  for failure in failures { print("GATE FAILED: \(failure)") }
  status = gates.exitStatus(for: report)
} catch {
  FileHandle.standardError.write(Data("thumbload: \(error)\n".utf8))
  status = 1
}
exit(status)
