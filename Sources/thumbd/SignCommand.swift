import ThumbServer
import ThumbSystem

/// `thumbd sign`: signs an imgproxy-style path, as imgproxy's client libraries do, for
/// scripts and tests.
enum SignCommand {
  static let usage = """
    thumbd sign: sign a path the way imgproxy and its client libraries do.

    Usage:
      thumbd sign PATH [--key HEX --salt HEX]... [--signature-size N]

    PATH is what follows the signature, starting with '/': the options and the
    source (/rs:fit:300:200/plain/https://example.com/a.jpg). Prints
    /SIGNATURE/PATH: HMAC-SHA256 under the key, over the salt and PATH, in
    URL-safe Base64 without padding, cut to --signature-size bytes.

    Options:
      --key HEX, --salt HEX
                        A key and its salt, hex. Repeat for several pairs;
                        the first signs. Default: THUMBD_SIGNING_KEYS and
                        THUMBD_SIGNING_SALTS (comma-separated hex).
      --signature-size N
                        Bytes of the digest kept, 1-32. Default:
                        THUMBD_SIGNATURE_SIZE, or 32.
      -h, --help        Show this help.

    Exit status: 0 signed, 2 usage error.
    """

  static func run(_ arguments: [String]) -> Int32 {
    var path: String?
    var keys: [String] = []
    var salts: [String] = []
    var size: Int?
    var index = 0
    func value() -> String? {
      index += 1
      return index < arguments.count ? arguments[index] : nil
    }
    while index < arguments.count {
      switch arguments[index] {
      case "-h", "--help":
        print(usage)
        return 0
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
    guard let path, path.hasPrefix("/") else {
      return fail("PATH, starting with '/', is required")
    }
    let environment = SystemFiles.environment
    if keys.isEmpty && salts.isEmpty {
      keys = list(environment["THUMBD_SIGNING_KEYS"])
      salts = list(environment["THUMBD_SIGNING_SALTS"])
    }
    let chosenSize = size ?? environment["THUMBD_SIGNATURE_SIZE"].flatMap { Int($0) } ?? 32
    do {
      let signing = try URLSignature(keys: keys, salts: salts, size: chosenSize)
      print(signing.signedPath(path))
      return 0
    } catch {
      return fail(error.description)
    }
  }

  private static func list(_ text: String?) -> [String] {
    (text ?? "").split(separator: ",").map { String($0.trimmingWhitespace()) }.filter {
      !$0.isEmpty
    }
  }

  private static func fail(_ message: String) -> Int32 {
    printError("thumbd sign: \(message)\n\n\(usage)")
    return 2
  }
}
