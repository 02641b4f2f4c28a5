/// The session protocol's names and limits (docs/PROTOCOL.md, section 2), defined once: the
/// server, the client and the load harness all read them from here.
public enum Wire {
  /// The path that upgrades a connection, and the `Upgrade` token it needs.
  public static let sessionPath = "/v1/session"
  /// The protocol's name in `Upgrade:`.
  public static let upgradeToken = "thumbd-session"
  /// The upgrade request a client sends when it shows JPEG and PNG only.
  public static let upgradeRequest = upgradeRequest(accepting: [])

  /// The upgrade request of a client that can also show `formats` (`webp`, `avif`): its
  /// `Accept` header states them once for the whole session, and `auto` loads resolve
  /// against it.
  public static func upgradeRequest(accepting formats: [Format]) -> [UInt8] {
    let types = formats.filter { $0 == .webp || $0 == .avif }.map { "image/" + $0.rawValue }
    let accept = types.isEmpty ? "" : "Accept: " + types.joined(separator: ", ") + "\r\n"
    return Array(
      ("GET \(sessionPath) HTTP/1.1\r\nHost: thumbd\r\nConnection: Upgrade\r\n"
        + "Upgrade: \(upgradeToken)\r\n" + accept + "\r\n").utf8)
  }
  /// The server's answer to it, exactly.
  public static let upgradeResponse = Array(
    ("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
      + "Upgrade: \(upgradeToken)\r\n\r\n").utf8)

  /// Every `op` of either direction.
  public enum Op: String, Sendable, CaseIterable {
    // Client to server.
    case load, cancel, priority, prefetch, release
    // Server to client.
    case image, error, prefetched, placeholder, preview
    case prefetchError = "prefetch_error"
  }

  /// Error codes the protocol adds to the error kinds of the HTTP side.
  public enum Code {
    /// A malformed frame: the server answers once and closes.
    public static let badFrame = "bad_frame"
    /// A message with a field missing, mistyped or out of its bounds, or an unknown op:
    /// answered for its slot (or with no slot), and the session goes on.
    public static let badMessage = "bad_message"
    /// A well-formed `load` or `prefetch` whose values are out of range.
    public static let invalidSpec = "invalid_spec"
    /// A prefetch item over the session memory bound.
    public static let busy = "busy"
  }

  /// The longest header line, newline included.
  public static let headerLimit = 16384
  /// The largest body a client frame may carry (they carry none today; it is read and
  /// ignored).
  public static let clientBodyLimit = 65536
  /// Slot numbers are 0...maxSlot, so one session's slot table stays bounded.
  public static let maxSlot = 65_535
  /// Items in one `prefetch` frame.
  public static let maxPrefetchItems = 1024
  /// Longest `item`, bytes.
  public static let maxItemLength = 1024
  /// Longest `url`, bytes.
  public static let maxURLLength = 8192
  /// Longest `rev` (a content revision, opaque to the server), bytes; HTTP's `&rev=` too.
  public static let maxRevisionLength = 256
  /// Tokens and rounds are 0...2^53 - 1: every such integer survives a JSON client that keeps
  /// numbers as doubles, so what the server echoes is what the client sent.
  public static let identifiers = 0...((1 << 53) - 1)
  /// Prefetch rounds with work pending, per session.
  public static let maxOpenRounds = 256
}

/// How urgently a load is wanted; shared work runs at its most urgent subscriber's priority.
public enum Priority: String, Sendable, Hashable, CaseIterable {
  /// Someone waits for it now.
  case visible
  /// Wanted soon.
  case normal
  /// Speculative: runs after the others.
  case prefetch
}

/// How a picture meets its box (`fit`).
public enum Fit: String, Sendable, Hashable, CaseIterable {
  /// Inside the box, aspect kept.
  case contain
  /// Filling the box, centre crop.
  case cover
  /// Stretched to the box.
  case fill
  /// `cover` when source and box have the same orientation, else `contain`.
  case auto
}

/// The encoded format asked for (`format`).
public enum Format: String, Sendable, Hashable, CaseIterable {
  /// AVIF or WebP when the session's upgrade request accepted them (and the server enables
  /// AVIF for `auto`), else PNG when the result has transparency, else JPEG.
  case auto
  /// PNG.
  case png
  /// JPEG.
  case jpeg
  /// WebP.
  case webp
  /// AVIF.
  case avif
}
