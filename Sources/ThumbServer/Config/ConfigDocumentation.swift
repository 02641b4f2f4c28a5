/// What each `thumbd serve` option means and defaults to, as `--help` prints it and
/// docs/CONFIG.md's table shows it: one text for both (`ConfigTests` holds the table to it).
extension ConfigOption {
  /// What the option does, as docs/CONFIG.md's table says it (Markdown).
  public var meaning: String { Self.documentation[key]?.meaning ?? "" }

  /// The default, as docs/CONFIG.md's table writes it (Markdown).
  public var defaultValue: String { Self.documentation[key]?.defaultValue ?? "" }

  /// Option flags within `distance` edits of `flag`, nearest first: the "did you mean" of an
  /// unknown flag.
  public static func near(_ flag: String, distance: Int = 3) -> [String] {
    let scored = (all.map(\.flag) + ["--config"]).map { ($0, editDistance($0, flag)) }
    return scored.filter { $0.1 <= distance }.sorted { $0.1 < $1.1 }.map(\.0)
  }

  /// Levenshtein distance over bytes (flags are ASCII).
  static func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.utf8)
    let b = Array(b.utf8)
    var previous = Array(0...b.count)
    for i in 1...max(a.count, 1) where !a.isEmpty {
      var current = [i] + [Int](repeating: 0, count: b.count)
      for j in stride(from: 1, through: b.count, by: 1) {
        current[j] = min(
          previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
      }
      previous = current
    }
    return a.isEmpty ? b.count : previous[b.count]
  }

  /// The default as the docs write it, and the meaning, by config key.
  static let documentation: [String: (defaultValue: String, meaning: String)] = [
    "socket": (
      "`${XDG_RUNTIME_DIR:-/tmp}/thumbd.sock`",
      "Unix socket path; a stale socket file is replaced only if nothing answers on it, any other file there is left alone"
    ),
    "socket_mode": (
      "`\"0660\"`", "socket permissions (octal), set exactly, never wider even briefly"
    ),
    "listen": (
      "`\"\"` (none)",
      "extra TCP listener `IPv4:PORT` or `[IPv6]:PORT` (port 0 picks one; the `listening` log line, written before the first answer, says which); keep it on loopback"
    ),
    "cache_dir": (
      "`${CACHE_DIRECTORY:-${XDG_CACHE_HOME:-/var/tmp}}/thumbd`",
      "disk cache of thumbnails (`\"\"` for none); `CACHE_DIRECTORY` is what systemd's `CacheDirectory=` sets"
    ),
    "disk_limit": ("`1GiB`", "disk cache budget; least recently used entries go first"),
    "memory_limit": (
      "`64MiB`", "memory cache budget, bytes of encoded thumbnails (no entry above a tenth)"
    ),
    "max_variants_per_source": (
      "64",
      "thumbnails (sizes, formats, revisions) one source may have in the memory cache and in the disk cache each; a new one beyond sends the oldest out. 0: no bound"
    ),
    "placeholders": (
      "true",
      "make a placeholder (a ThumbHash, a dominant colour, the source's size) from the pixels of every thumbnail rendered, kept per source and revision in memory and on disk (`cache_dir/placeholders`); sessions send it in a `placeholder` frame before the image, `/v1/placeholder` answers it"
    ),
    "memory_count_limit": ("4096", "memory cache entries"),
    "memory_budget": (
      "`256MiB`",
      "what the pipeline's work may hold at once: source bytes in flight (each download reserves 4 MiB before it starts; a larger body of known size, a file's or one with a `Content-Length`, waits for room for all of it before it is read; a larger body of unknown length is counted as it arrives), every decode's memory estimate from its header while it runs, and the memory cache (which gives way: it is trimmed when work needs the room). Work that does not fit waits, visible first; a job that alone needs more gets 413 `too_large` (a desktop job over D-Bus instead waits for the whole budget and runs alone: the desktop refuses files by the pixel and byte limits). At least 16 MiB; sizing rule below"
    ),
    "memory_process_allowance": (
      "`24MiB`",
      "how much of the daemon's own resident memory `memory_budget` leaves uncounted: its code, the decoders' libraries as each is first used, the allocator's free lists (about 25 MiB with JPEG and PNG, 44 MiB once HEIF, AVIF and WebP have run). What work and the cache do not explain beyond it, read when each decode ends, takes that much room from work (at most half the budget), so RSS stays within about `memory_budget` + this + 8 MiB; the highest reading holds until the next idle trim reads afresh. `/metrics`: `thumbd_memory_budget_used_bytes{part=\"process\"}`. `thumbd serve` only"
    ),
    "idle_trim": (
      "2",
      "seconds without work after which freed memory goes back to the kernel (`malloc_trim`); 0: never"
    ),
    "malloc_arenas": (
      "2",
      "glibc malloc arenas (0: glibc's default, eight per core); `MALLOC_ARENA_MAX` in the environment wins"
    ),
    "malloc_mmap_threshold": (
      "`1MiB`",
      "allocations from this size up are mapped on their own and given back when freed (0: glibc's sliding threshold, which climbs to 32 MiB); `MALLOC_MMAP_THRESHOLD_` wins"
    ),
    "max_source_bytes": (
      "`32MiB`", "largest source download or file (413 beyond), enforced while it streams"
    ),
    "max_pixels": (
      "100000000", "largest source width x height, checked from the header before decoding (413)"
    ),
    "max_dimension": ("65535", "longest source side in pixels (413)"),
    "decode_timeout": (
      "10",
      "seconds a decode may take, wall clock (422 `decode_timeout` beyond; 0 for none): the guard behind every specific decoder limit"
    ),
    "video_frames": (
      "true",
      "videos (MP4, MOV, 3GP, Matroska, WebM, AVI, MPEG, MPEG-TS, FLV, Ogg, WMV) get their frame 10% in, and PDFs their first page and SVGs their drawing, from `thumbd-frame`: FFmpeg, poppler and librsvg in a bubblewrap sandbox, a process forked per file from a worker started once for many (20 CPU seconds, 1 GiB, `decode_timeout` per file), never in the daemon; false refuses them (415 `unsupported_format`) and starts no sandbox. Needs `thumbd-frame` beside `thumbd`; the log says at start when they are unavailable"
    ),
    "allowed_schemes": (
      "`[\"http\",\"https\",\"file\"]`", "source URL schemes; `file` still needs `file_roots`"
    ),
    "allowed_hosts": (
      "`[]` (any public host)",
      "origin host allowlist; `.example.com` takes the domain and its subdomains"
    ),
    "file_roots": (
      "`[]` (no file URLs)",
      "directories `file://` sources must stay inside, after resolving symlinks (links inside a root, absolute or relative, are followed; links out are refused); a URL may spell a root as configured or as resolved; a root that is missing or unreadable stops start-up"
    ),
    "allow_private": (
      "false",
      "accept every origin address, loopback and private ones included (tests); prefer `allowed_networks`"
    ),
    "allowed_networks": (
      "`[]`",
      "non-public networks accepted besides public addresses, and nothing else: CIDRs such as `127.0.0.0/8` for a sidecar origin or `10.20.0.0/16` for an intranet. Checked on every resolved address and again on every address the fetcher connects to"
    ),
    "fetch_concurrency": (
      "16",
      "downloads at once for visible and normal work; more wait, most urgent first. Prefetch downloads take only free slots (at most three quarters) and never keep a visible download waiting, so up to 1.75x this many may run"
    ),
    "origin_connections": (
      "8",
      "downloads from one origin (host and port) at once, and the kept-alive connections to it; an origin that never answers holds at most this many download slots"
    ),
    "decode_threads": ("0 (one per core)", "decode threads"),
    "max_queued_decodes": (
      "256", "decodes allowed to wait; beyond it requests get 503 with `Retry-After`"
    ),
    "prefetch_concurrency": (
      "8",
      "prefetch jobs in progress at once (downloading, waiting for a decode, decoding); more wait, and a free place goes to the session holding the fewest, so one session's flood of hints cannot starve another's look-ahead. While visible requests arrive, sessions not showing anything themselves share only a quarter of the places"
    ),
    "event_loops": (
      "0 (one per core)",
      "event-loop threads serving client connections (HTTP and sessions); each accepts from every listener and keeps the connections it accepted. The bounds below hold over all of them together"
    ),
    "max_connections": (
      "10000",
      "client connections at once; when all are taken, the connection idle longest is closed for a new one (with none idle, the new one is refused)"
    ),
    "header_timeout": (
      "10",
      "seconds for a request head (or a session frame) to arrive, from the accept or from its first byte; slower clients are closed"
    ),
    "idle_timeout": (
      "60", "seconds a kept-alive connection may sit without a request (sessions are exempt)"
    ),
    "session_memory": (
      "`64MiB`",
      "bytes all sessions' announced, unanswered prefetch items may hold (each session at most 2 MiB of it); an item past the bound is answered `prefetch_error` `busy`"
    ),
    "connect_timeout": (
      "5", "seconds to the origin's response head, name lookup and connect included (504 beyond)"
    ),
    "request_timeout": (
      "20", "seconds for a whole fetch: every redirect hop, retry and backoff (504 beyond)"
    ),
    "max_redirects": (
      "3",
      "redirects followed (0-100), each hop checked against the policy again; a redirect's body is never read"
    ),
    "fetch_retries": (
      "2",
      "attempts after the first for connect failures, resets and 429/502/503/504 from the origin, with exponential backoff and jitter (or the origin's `Retry-After`), all within `request_timeout`; other 4xx and undecodable images are never retried"
    ),
    "dns_cache_seconds": (
      "30",
      "how long a name lookup's answer is reused (0: every attempt looks up again); caching cannot weaken the address rules, which are applied again to every address right before connecting"
    ),
    "ca_file": ("`\"\"` (system bundle)", "CA certificates (PEM bundle) trusted for https origins"),
    "ca_path": (
      "`\"\"` (system directory)", "directory of hashed CA certificates for https origins"
    ),
    "default_format": (
      "`auto`",
      "output format when a request names none: `auto` (negotiated from `Accept`: AVIF when accepted and `auto_avif` is on, else WebP when accepted, else PNG with transparency and JPEG without), `png`, `jpeg`, `webp`, `avif`, `gif`"
    ),
    "default_quality": ("80", "quality of JPEG, WebP and AVIF output when a request names none"),
    "auto_avif": (
      "false",
      "let `format=auto` choose AVIF for clients whose `Accept` names `image/avif` (off: AVIF encoding costs several times WebP's; see docs/BENCHMARKS.md, \"Encoding\")"
    ),
    "avif_speed": ("8", "AVIF encoder speed, 0 (slowest, smallest) to 9"),
    "max_animation_frames": (
      "1",
      "frames an animated GIF or WebP keeps when the result is WebP or GIF (imgproxy's `IMGPROXY_MAX_ANIMATION_FRAMES`): above 1, an animation of that format of at most that many frames, delays and loop count kept, each frame through the same resize, geometry and filters; frames times the source's pixels must stay within `max_pixels` (else 422, before any frame is decoded). 1 keeps the first frame alone"
    ),
    "colour": (
      "srgb",
      "what becomes of embedded colour profiles when a request gives no `colour`: `srgb` converts to sRGB (output untagged), `keep` leaves the pixels and copies an RGB profile into the output"
    ),
    "cmyk_profile": (
      "/usr/share/color/icc/ghostscript/default_cmyk.icc",
      "standard CMYK profile for CMYK JPEGs without a usable profile of their own (Debian's libgs-common); empty, missing or not CMYK: a fixed formula, with a warning in the log"
    ),
    "cache_max_age": (
      "86400",
      "longest `Cache-Control: max-age=` of thumbnails, seconds; a source's remaining freshness is shorter when it is"
    ),
    "source_default_ttl": (
      "300",
      "freshness of an http(s) source whose origin sends no `max-age`, `s-maxage` or `Expires`, and the `max-age` `file://` thumbnails advertise (files are checked on every request)"
    ),
    "source_min_ttl": (
      "0",
      "an origin's lifetime is raised to at least this, except with `no-cache`, `no-store` or `must-revalidate`, whose word wins"
    ),
    "source_max_ttl": ("604800", "no source stays fresh longer, whatever its origin says"),
    "stale_while_revalidate": (
      "0",
      "seconds a stale thumbnail may be served (`X-Thumbd-Cache: stale`) while one revalidation runs; the origin's own `stale-while-revalidate` wins when shorter, `must-revalidate`/`no-cache` make it 0"
    ),
    "stale_if_error": (
      "0",
      "seconds past its freshness a stale thumbnail may be served (`X-Thumbd-Cache: stale`) when the origin fails or times out; 0: an error. The origin's own `stale-if-error` wins when shorter"
    ),
    "network_purge": (
      "false",
      "accept `DELETE /v1/source` on the TCP listener too (it is always accepted on the Unix socket)"
    ),
    "signing_keys": (
      "`[]` (none)",
      "hex HMAC keys of signed paths (imgproxy's `IMGPROXY_KEYS`), tried in order so a key can be rotated; with keys, the path form's signature is checked before any work (403 `invalid_signature`) and the TCP listener refuses unsigned `/v1/thumbnail` requests (403 `unsigned_request`)"
    ),
    "signing_salts": (
      "`[]`", "the hex salt of each key, by position (imgproxy's `IMGPROXY_SALTS`)"
    ),
    "signature_size": (
      "32",
      "bytes of the HMAC-SHA256 a signature keeps, 1-32 (imgproxy's `IMGPROXY_SIGNATURE_SIZE`)"
    ),
    "allow_unsigned_tcp": (
      "false",
      "with signing keys, still take unsigned `/v1/thumbnail` requests on the TCP listener (the Unix socket always takes them)"
    ),
    "path_prefix": (
      "`\"\"` (the root)",
      "serve the imgproxy path form under this prefix (imgproxy's `IMGPROXY_PATH_PREFIX`), e.g. `/img`: `/img/SIGNATURE/OPTIONS/...`; the signature covers the path after the prefix"
    ),
    "presets": (
      "`[]`",
      "named option sets in imgproxy's form, `NAME=OPTION/OPTION` (`card=rs:fill:400:300/q:75`), used as `preset=NAME` in the query form and `pr:NAME` in the path form; `default` applies to every request; each is checked at start-up (imgproxy's `IMGPROXY_PRESETS`)"
    ),
    "watermarks": (
      "`[]`",
      "pictures requests may lay over images with `wm` (docs/PROTOCOL.md), `NAME=PATH`; each is decoded once at start-up (any format thumbd reads, at most 4096 px a side) and kept premultiplied in memory; `wm` without a name uses `default`, or the only one. Requests name them, never a path or URL"
    ),
    "presets_only": (
      "false",
      "refuse every option that does not come from a preset (400): the query form takes `url`, `rev`, `priority`, `preset` and `placeholder` only, spelled exactly (any other parameter is refused), and the path form's options segment is a list of preset names, `/SIGNATURE/NAME:NAME/plain/...` (imgproxy's `IMGPROXY_ONLY_PRESETS`); the TCP listener then takes no sessions"
    ),
    "client_hints": (
      "false",
      "let `Sec-CH-DPR`/`DPR` and `Sec-CH-Width`/`Width` size a request that names no size (no `w`, `h` or `dpr`: a URL that names one is exact, as a `srcset` candidate is), rounded so that however they are cycled, one source gets at most 19 hinted sizes per format at the defaults, which `max_variants_per_source` must keep (start-up refuses a setting where it cannot): a width hint gives a width in device pixels whatever the DPR, rounded up to the next of 2^n, 1.25·2^n and 1.5·2^n from 64 (16 widths up to 2048); a DPR alone gives a scale of 1.5, 2, 3 or 4 (up to `client_hints_max_dpr`); responses send `Accept-CH` and `Vary` on the hints consulted (imgproxy's `IMGPROXY_ENABLE_CLIENT_HINTS`)"
    ),
    "client_hints_max_width": (
      "2048", "the widest image, in device pixels, a width hint may ask for"
    ),
    "client_hints_max_dpr": ("3", "the largest DPR a hint may ask for"),
    "client_miss_rate": (
      "`auto`",
      "misses a second one client may send over TCP (requests the memory cache cannot answer), refilling a bucket of `client_miss_burst`; past it, 429 with `Retry-After`. `auto`: 2 a second per core (4 on two cores), so one client cannot keep the machine's cores busy; 0: no limit. On the Unix socket only requests a proxy forwarded (with `X-Forwarded-For`, as nginx sends) are limited, by that address"
    ),
    "client_miss_burst": ("100", "misses a quiet client may send at once"),
    "trusted_proxies": (
      "`[\"127.0.0.0/8\", \"::1/128\"]`",
      "peers (addresses or CIDR blocks) whose `X-Forwarded-For` names the client for `client_miss_rate`: the nearest address in it that is not a trusted proxy. IPv6 clients count by /64"
    ),
    "dbus": (
      "`\"\"` (none)",
      "serve the desktop's thumbnailer (`org.freedesktop.thumbnails.Thumbnailer1` and `Cache1`, docs/DESKTOP.md) on this bus: `session`, or a D-Bus address; the names are taken only when set, and start-up fails while another program (tumblerd) owns them"
    ),
    "negative_cache_seconds": (
      "0", "how long a failed source is answered from memory without new work"
    ),
    "log_level": (
      "`info`",
      "`debug` (adds one line per session load), `info` (one line per request), `warn`, `error`"
    ),
    "log_format": ("`logfmt`", "`logfmt` or `json` (one object per line, all values strings)"),
    "log_file": ("`\"\"` (stderr)", "append logs to this file; SIGHUP reopens it after rotation"),
    "drain_timeout": (
      "10",
      "seconds SIGTERM/SIGINT wait for in-flight requests and session loads; what is left is cancelled and counted in the `stopped` log line"
    ),
  ]
}
