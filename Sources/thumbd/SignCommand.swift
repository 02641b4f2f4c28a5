import ImagePipeline
import ThumbProtocol
import ThumbServer
import ThumbSystem
import ThumbWire

/// `thumbd sign`: signs an imgproxy-style path, as imgproxy's client libraries do, for
/// scripts and tests.
enum SignCommand {
  static let usage = """
    thumbd sign: sign a path the way imgproxy and its client libraries do.

    Usage:
      thumbd sign PATH [--key HEX --salt HEX]... [--signature-size N]
      thumbd sign URL [-w N] [-h N] [--fit F] [--scale X] [--format F]
                      [--quality N] [--preset NAME]... [--option OPT]...
                      [--base64] [--prefix P] [--key HEX --salt HEX]...

    PATH is what follows the signature, starting with '/': the options and the
    source (/rs:fit:300:200/plain/https://example.com/a.jpg). A URL (anything
    not starting with '/') is made into such a path from the options below,
    the source percent-encoded after /plain/ (or in URL-safe Base64 with
    --base64). Prints [PREFIX]/SIGNATURE/PATH: HMAC-SHA256 under the key, over
    the salt and PATH, in URL-safe Base64 without padding, cut to
    --signature-size bytes.

    Image options (a URL only), in imgproxy's names:
      -w, --width N     Box width in points (w:N).
      -h, --height N    Box height in points (h:N).
      --fit F           contain, cover or fill (rt:fit, rt:fill, rt:force).
      --scale X         Device pixel ratio (dpr:X).
      --format F        jpeg, png, webp or avif (f:F).
      --quality N       Lossy quality (q:N).
      --preset NAME     A preset from the daemon's config (pr:NAME).
      --option OPT      Any option segment as is, e.g. g:ce.
      --base64          The source in URL-safe Base64 instead of /plain/.
      --prefix P        The daemon's path_prefix, put before the signature.

    Options:
      --key HEX, --salt HEX
                        A key and its salt, hex. Repeat for several pairs;
                        the first signs. Default: THUMBD_SIGNING_KEYS and
                        THUMBD_SIGNING_SALTS (comma-separated hex).
      --signature-size N
                        Bytes of the digest kept, 1-32. Default:
                        THUMBD_SIGNATURE_SIZE, or 32.
      --help            Show this help.

    Exit status: 0 signed, 2 usage error.
    """

  static func run(_ arguments: [String]) -> Int32 {
    var path: String?
    var keys: [String] = []
    var salts: [String] = []
    var size: Int?
    var options: [String] = []
    var base64 = false
    var prefix = ""
    var index = 0
    func value() -> String? {
      index += 1
      return index < arguments.count ? arguments[index] : nil
    }
    while index < arguments.count {
      switch arguments[index] {
      case "--help":
        print(usage)
        return 0
      case "-w", "--width", "-h", "--height", "--fit", "--scale", "--format", "--quality",
        "--preset", "--option":
        let flag = arguments[index]
        guard let text = value(), let segment = Self.segment(flag, text) else {
          return fail("\(flag) needs a valid value")
        }
        options.append(segment)
      case "--base64": base64 = true
      case "--prefix":
        guard let text = value() else { return fail("--prefix needs a value") }
        prefix = text
      case "--key":
        guard let text = value() else { return fail("--key needs a value") }
        keys.append(text)
      case "--salt":
        guard let text = value() else { return fail("--salt needs a value") }
        salts.append(text)
      case "--signature-size":
        guard let text = value(), let number = Int(text) else {
          return fail("--signature-size needs a number")
        }
        size = number
      case let argument where argument.hasPrefix("-") && argument != "-":
        return fail("unknown option '\(argument)'")
      case let argument:
        guard path == nil else { return fail("one PATH only") }
        path = argument
      }
      index += 1
    }
    guard let argument = path, !argument.isEmpty else {
      return fail("a PATH (starting with '/') or a source URL is required")
    }
    let signedPart: String
    if argument.hasPrefix("/") {
      guard options.isEmpty && !base64 else {
        return fail("image options go with a source URL, not with a PATH")
      }
      signedPart = argument
    } else {
      let source =
        base64
        ? "/" + Base64.urlSafe(Array(argument.utf8))
        : "/plain/" + PercentEncoding.encode(argument, keeping: ":/")
      signedPart = options.map { "/" + $0 }.joined() + source
    }
    let environment = SystemFiles.environment
    if keys.isEmpty && salts.isEmpty {
      keys = list(environment["THUMBD_SIGNING_KEYS"])
      salts = list(environment["THUMBD_SIGNING_SALTS"])
    }
    let chosenSize = size ?? environment["THUMBD_SIGNATURE_SIZE"].flatMap { Int($0) } ?? 32
    do {
      let signing = try URLSignature(keys: keys, salts: salts, size: chosenSize)
      print(prefix + signing.signedPath(signedPart))
      return 0
    } catch {
      return fail(error.description)
    }
  }

  /// The option segment a flag and its value stand for; nil when the value is not one.
  static func segment(_ flag: String, _ value: String) -> String? {
    func number() -> String? { Int(value).map { "\($0)" } }
    switch flag {
    case "-w", "--width": return number().map { "w:" + $0 }
    case "-h", "--height": return number().map { "h:" + $0 }
    case "--quality": return number().map { "q:" + $0 }
    case "--scale": return Double(value).map { _ in "dpr:" + value }
    case "--fit":
      return ["contain": "rt:fit", "cover": "rt:fill", "fill": "rt:force"][value]
    case "--format":
      let named = value == "jpg" || OutputFormat(rawValue: value).map { $0 != .auto } == true
      return named ? "f:" + value : nil
    case "--preset", "--option":
      guard !value.isEmpty, !value.contains("/") else { return nil }
      return flag == "--preset" ? "pr:" + value : value
    default: return nil
    }
  }

  private static func list(_ text: String?) -> [String] {
    (text ?? "").split(separator: ",").map { String($0.trimmingWhitespace()) }.filter {
      !$0.isEmpty
    }
  }

  private static func fail(_ message: String) -> Int32 {
    printError("thumbd sign: \(message)\nRun 'thumbd sign --help' for usage.")
    return 2
  }
}
