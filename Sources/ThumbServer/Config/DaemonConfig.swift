import ImagePipeline

/// Everything `thumbd serve` can be told, with the defaults of `Config/thumbd.json`. Each field
/// is one key of the config file, one `--flag` and one `THUMBD_...` variable; the table in
/// `ConfigOption.all` says which.
public struct DaemonConfig: Sendable, Hashable {
  /// Unix socket path (`${NAME:-fallback}` expands from the environment).
  public var socket = "${XDG_RUNTIME_DIR:-/tmp}/thumbd.sock"
  /// Permission bits of the socket file.
  public var socketMode: UInt32 = 0o660
  /// Extra TCP listener, `HOST:PORT`; empty for none.
  public var listen = ""
  /// Disk cache directory; empty for none.
  public var cacheDir = "${CACHE_DIRECTORY:-${XDG_CACHE_HOME:-/var/tmp}}/thumbd"
  /// Disk cache budget in bytes.
  public var diskLimit = 1 << 30
  /// Memory cache budget in bytes of encoded thumbnails.
  public var memoryLimit = 64 << 20
  /// Memory cache entry limit.
  public var memoryCountLimit = 4096
  /// Bytes the pipeline's work may hold at once (source bytes in flight, decode estimates,
  /// the memory cache); work beyond it waits, a job alone beyond it gets 413 `too_large`.
  public var memoryBudget = 256 << 20
  /// Bytes of `thumbd serve`'s own resident memory (code, libraries, the allocator's free
  /// lists) the memory budget leaves uncounted; the rest takes room from work.
  public var memoryProcessAllowance = 24 << 20
  /// Seconds without work before freed memory is given back to the kernel; 0 for never.
  public var idleTrim = 2.0
  /// glibc malloc arenas (0: glibc's default of eight per core); MALLOC_ARENA_MAX wins.
  public var mallocArenas = 2
  /// Allocations from this size up are mapped on their own and unmapped when freed (0:
  /// glibc's sliding threshold); MALLOC_MMAP_THRESHOLD_ wins.
  public var mallocMmapThreshold = 1 << 20
  /// Largest source, in bytes.
  public var maxSourceBytes = 32 << 20
  /// Largest source, in pixels.
  public var maxPixels = 100_000_000
  /// Longest source side, in pixels.
  public var maxDimension = 65_535
  /// Seconds a decode may take (422 `decode_timeout` beyond); 0 for none.
  public var decodeTimeout = 10.0
  /// Whether videos get a frame from the sandboxed worker (`thumbd-frame`).
  public var videoFrames = true
  /// URL schemes accepted.
  public var allowedSchemes = ["http", "https", "file"]
  /// Hosts accepted (a leading dot takes subdomains); empty accepts any public host.
  public var allowedHosts: [String] = []
  /// Directories `file://` URLs must stay inside; empty refuses every file URL.
  public var fileRoots: [String] = []
  /// Accept loopback and private origin addresses.
  public var allowPrivate = false
  /// Non-public networks (CIDR) accepted besides public addresses, and nothing else.
  public var allowedNetworks: [String] = []
  /// Downloads at once.
  public var fetchConcurrency = 16
  /// Downloads and kept-alive connections per origin at once.
  public var originConnections = 8
  /// Decode threads; 0 means one per core.
  public var decodeThreads = 0
  /// Decodes allowed to wait before requests get 503.
  public var maxQueuedDecodes = 256
  /// Prefetch jobs in progress at once, shared fairly between sessions.
  public var prefetchConcurrency = 8
  /// Event-loop threads serving client connections; 0 means one per core.
  public var eventLoops = 0
  /// Client connections at once.
  public var maxConnections = 10_000
  /// Seconds for a request head to arrive (from the accept, or from its first byte).
  public var headerTimeout = 10.0
  /// Seconds a kept-alive connection may sit without a request.
  public var idleTimeout = 60.0
  /// `session_memory`: bytes every session's announced, unanswered prefetch items may hold.
  public var sessionMemory = 64 << 20
  /// Seconds to wait for an origin's response headers.
  public var connectTimeout = 5.0
  /// Seconds for a whole origin transfer.
  public var requestTimeout = 20.0
  /// Redirects followed, each checked again.
  public var maxRedirects = 3
  /// Attempts after the first for connect failures, resets, 429, 502, 503, 504.
  public var fetchRetries = 2
  /// Seconds a name lookup's answer is reused; 0 looks every attempt up again.
  public var dnsCacheSeconds = 30.0
  /// CA bundle for https origins; empty for the system's.
  public var caFile = ""
  /// Directory of CA certificates for https origins; empty for the system's.
  public var caPath = ""
  /// Output format when a request gives none.
  public var defaultFormat = "auto"
  /// Quality of the lossy formats (JPEG, WebP, AVIF) when a request gives none.
  public var defaultQuality = 80
  /// Whether `format=auto` may choose AVIF for clients that accept it. Off by default: AVIF
  /// costs several times WebP's encoding time (docs/BENCHMARKS.md, "Encoding").
  public var autoAVIF = false
  /// AVIF encoder speed, 0 (slowest, smallest) ... 9.
  public var avifSpeed = Thumbnailer.defaultAVIFSpeed
  /// Frames an animated GIF or WebP keeps in a WebP result; 1 for the first frame alone.
  public var maxAnimationFrames = 1
  /// What becomes of colour profiles when a request does not say: `srgb` or `keep`.
  public var colour = ColourMode.srgb
  /// The standard CMYK profile for CMYK JPEGs without a usable one of their own; empty for
  /// the fixed formula.
  public var cmykProfile = ColourManagement.defaultCMYKProfilePath
  /// Longest `Cache-Control: max-age` of thumbnails, in seconds; a source's remaining
  /// freshness is shorter when it is.
  public var cacheMaxAge = 86_400
  /// Freshness of sources whose origin sends none, and what `file://` thumbnails advertise.
  public var sourceDefaultTTL = 300.0
  /// Lifetimes an origin gives are raised to at least this (not with no-cache or
  /// must-revalidate).
  public var sourceMinTTL = 0.0
  /// No source stays fresh longer than this.
  public var sourceMaxTTL = 604_800.0
  /// Seconds a stale source may be served while it is revalidated.
  public var staleWhileRevalidate = 0.0
  /// Seconds a stale source may be served when its origin fails.
  public var staleIfError = 0.0
  /// Whether `DELETE /v1/source` is accepted on the TCP listener (always on the socket).
  public var networkPurge = false
  /// Seconds a failed source is answered from memory without new work; 0 remembers none.
  public var negativeCacheSeconds = 0.0
  /// Least severe log level written.
  public var logLevel = LogLevel.info
  /// `logfmt` or `json` lines.
  public var logFormat = LogFormat.logfmt
  /// Log file (reopened on SIGHUP); empty for stderr.
  public var logFile = ""
  /// Seconds SIGTERM waits for in-flight requests before exiting anyway.
  public var drainTimeout = 10.0
  /// Hex keys of imgproxy-style signed paths, tried in order; empty: paths are not signed.
  public var signingKeys: [String] = []
  /// The hex salt of each key, by position.
  public var signingSalts: [String] = []
  /// Bytes of the HMAC a signature keeps (imgproxy's `signature_size`).
  public var signatureSize = 32
  /// Whether the TCP listener takes unsigned requests when keys are configured.
  public var allowUnsignedTCP = false
  /// Where the imgproxy path form is served: "" for the root, or a prefix such as `/img`.
  public var pathPrefix = ""
  /// Named option sets, `NAME=OPTIONS` in imgproxy's form.
  public var presets: [String] = []
  /// Whether only presets may shape an image.
  public var presetsOnly = false
  /// Watermarks requests may lay over images (`wm`), `NAME=PATH`.
  public var watermarks: [String] = []
  /// Whether client hints choose the width and scale a request leaves open.
  public var clientHints = false
  /// The widest image, in device pixels, a `Width` hint may ask for.
  public var clientHintsMaxWidth = 2048
  /// The largest DPR a hint may ask for.
  public var clientHintsMaxDPR = 3
  /// Misses a second one client may send over TCP; 0 for no limit; nil (`auto`, the default)
  /// for `missesPerCore` a second per core (`effectiveClientMissRate`).
  public var clientMissRate: Int?
  /// The default miss rate per core: what the machine can render follows its cores (a miss of
  /// a 12 MP photo costs a core about 0.2 s), so one client at 2 a second per core leaves most
  /// of every core to the others (at 50 a second, 4 connections from one address kept two
  /// cores saturated without a 429).
  public static let missesPerCore = 2
  /// `clientMissRate` resolved for this machine.
  public var effectiveClientMissRate: Int {
    clientMissRate ?? Self.missesPerCore * ThumbnailPipeline.coreCount
  }
  /// Misses a quiet client may send at once.
  public var clientMissBurst = 100
  /// Peers whose `X-Forwarded-For` names the client.
  public var trustedProxies = ["127.0.0.0/8", "::1/128"]
  /// Thumbnails one source may have in each cache; 0 for no bound.
  public var maxVariantsPerSource = 64
  /// Whether every thumbnail made also yields a placeholder (ThumbHash, colour, size).
  public var placeholders = true
  /// The bus the desktop's thumbnail services are served on: "" for none, `session`, or a
  /// D-Bus address.
  public var dbus = ""

  /// The embedded defaults.
  public init() {}
}

/// Severity of a log line.
public enum LogLevel: String, Sendable, Hashable, CaseIterable, Comparable, NamedChoice {
  case debug, info, warn, error

  /// Orders by severity.
  public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
    allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
  }
}

/// How log lines are written.
public enum LogFormat: String, Sendable, Hashable, CaseIterable, NamedChoice {
  /// `key=value` pairs.
  case logfmt
  /// One JSON object per line.
  case json
}
