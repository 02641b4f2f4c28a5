import ThumbProtocol
import ThumbSystem
import ThumbWire

/// imgproxy's URL signature, so its client libraries and a site's signed URLs work with thumbd:
/// HMAC-SHA256 under a key, over a salt followed by the path after the signature (leading `/`
/// included), its first `size` bytes in URL-safe Base64 without padding.
///
/// Several key and salt pairs may be configured (to rotate a key): a signature is accepted
/// when any pair made it. Every pair is tried and every byte compared whatever the outcome, so
/// the time taken says nothing about how much of a wrong signature was right.
public struct URLSignature: Sendable {
  /// One key and the salt that goes with it.
  public struct Pair: Sendable, Hashable {
    /// The HMAC key.
    public let key: [UInt8]
    /// Put before the path.
    public let salt: [UInt8]
  }

  /// Why keys and salts cannot be used, in a sentence naming the setting.
  public struct SettingError: Error, CustomStringConvertible, Equatable {
    /// What is wrong.
    public let description: String
  }

  /// The pairs, the first of which signs.
  public let pairs: [Pair]
  /// Bytes of the digest kept (1 to 32; imgproxy's `signature_size`).
  public let size: Int

  /// Pairs from hex keys and salts, matched by position (imgproxy's `IMGPROXY_KEYS` and
  /// `IMGPROXY_SALTS`).
  public init(keys: [String], salts: [String], size: Int = 32) throws(SettingError) {
    guard !keys.isEmpty else { throw SettingError(description: "signing_keys: no key given") }
    guard keys.count == salts.count else {
      throw SettingError(
        description:
          "signing_keys and signing_salts differ in number (\(keys.count) and \(salts.count)):"
          + " each key needs its salt")
    }
    guard (1...32).contains(size) else {
      throw SettingError(description: "signature_size: \(size) is not in 1...32")
    }
    var pairs: [Pair] = []
    for (index, (key, salt)) in zip(keys, salts).enumerated() {
      guard let keyBytes = Self.hex(key), !keyBytes.isEmpty else {
        throw SettingError(description: "signing_keys: key \(index + 1) is not hex")
      }
      guard let saltBytes = Self.hex(salt) else {
        throw SettingError(description: "signing_salts: salt \(index + 1) is not hex")
      }
      pairs.append(Pair(key: keyBytes, salt: saltBytes))
    }
    self.pairs = pairs
    self.size = size
  }

  /// The signature of `path` (everything after the signature, starting with `/`) under the
  /// first pair.
  public func sign(_ path: some StringProtocol) -> String {
    Self.signature(pairs[0], Array(path.utf8), size: size)
  }

  /// `/<signature><path>`: the signed path to put after the server's address.
  public func signedPath(_ path: some StringProtocol) -> String { "/" + sign(path) + path }

  /// Whether `signature` is what some pair makes of `path`. Takes the same time for any
  /// signature of a given length, right or wrong, whichever pair (if any) made it.
  public func verify(signature: some StringProtocol, path: some StringProtocol) -> Bool {
    let given = Array(signature.utf8)
    let message = Array(path.utf8)
    var matched: UInt8 = 0
    for pair in pairs {
      let expected = Array(Self.signature(pair, message, size: size).utf8)
      matched |= Self.equal(given, expected)
    }
    return matched == 1
  }

  static func signature(_ pair: Pair, _ path: [UInt8], size: Int) -> String {
    Base64.urlSafe(Array(SHA256.hmac(key: pair.key, message: pair.salt + path).prefix(size)))
  }

  /// 1 when the two are equal, else 0, comparing every byte of `expected` whatever differs
  /// first.
  static func equal(_ given: [UInt8], _ expected: [UInt8]) -> UInt8 {
    // The given length is the caller's to see; only the bytes must not show.
    var difference: UInt8 = given.count == expected.count ? 0 : 1
    for index in expected.indices {
      let other = index < given.count ? given[index] : ~expected[index]
      difference |= other ^ expected[index]
    }
    return difference == 0 ? 1 : 0
  }

  /// Bytes of an even-length hex string; nil for anything else.
  static func hex(_ text: String) -> [UInt8]? {
    let digits = Array(text.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(digits.count / 2)
    var index = 0
    while index < digits.count {
      guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else {
        return nil
      }
      bytes.append(high << 4 | low)
      index += 2
    }
    return bytes
  }

  private static func nibble(_ digit: UInt8) -> UInt8? {
    switch digit {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - 48
    case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - 87
    case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - 55
    default: nil
    }
  }
}
