import Testing
import ThumbProtocol
import ThumbSystem
import ThumbWire

@testable import ThumbServer

/// SHA-256 and HMAC against their standards' vectors, and imgproxy's URL signature against the
/// example in its documentation ("Signing a URL": key `secret`, salt `hello`).
@Suite("URL signatures")
struct URLSignatureTests {
  static func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
  }

  @Test(
    "SHA-256 gives FIPS 180-4's digests",
    arguments: [
      ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
      ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
      (
        "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
      ),
    ])
  func sha256(message: String, digest: String) {
    #expect(Self.hex(SHA256.hash(Array(message.utf8))) == digest)
  }

  @Test("SHA-256 of a million 'a's (many blocks, padding in a block of its own at 56 bytes)")
  func sha256Long() {
    #expect(
      Self.hex(SHA256.hash([UInt8](repeating: 0x61, count: 1_000_000)))
        == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    #expect(
      Self.hex(SHA256.hash([UInt8](repeating: 0x61, count: 56)))
        == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a")
  }

  @Test("HMAC-SHA256 gives RFC 4231's results (a short key, and one longer than a block)")
  func hmac() {
    #expect(
      Self.hex(
        SHA256.hmac(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8)))
        == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    #expect(
      Self.hex(
        SHA256.hmac(
          key: [UInt8](repeating: 0xaa, count: 131),
          message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
        == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
  }

  static let documentedPath =
    "/rs:fill:300:400:0/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png"

  @Test("imgproxy's documented example: its key, salt and path give its signature")
  func documentedExample() throws {
    let signing = try URLSignature(keys: ["736563726574"], salts: ["68656C6C6F"])
    #expect(signing.sign(Self.documentedPath) == "oKfUtW34Dvo2BGQehJFR4Nr0_rIjOtdtzJ3QFsUcXH8")
    #expect(
      signing.signedPath(Self.documentedPath)
        == "/oKfUtW34Dvo2BGQehJFR4Nr0_rIjOtdtzJ3QFsUcXH8" + Self.documentedPath)
    #expect(
      signing.verify(
        signature: "oKfUtW34Dvo2BGQehJFR4Nr0_rIjOtdtzJ3QFsUcXH8", path: Self.documentedPath))
  }

  @Test("signature_size keeps the digest's first bytes (8: 11 Base64 characters)")
  func truncated() throws {
    let signing = try URLSignature(keys: ["736563726574"], salts: ["68656c6c6f"], size: 8)
    #expect(signing.sign(Self.documentedPath) == "oKfUtW34Dvo")
    #expect(signing.verify(signature: "oKfUtW34Dvo", path: Self.documentedPath))
    #expect(
      !signing.verify(
        signature: "oKfUtW34Dvo2BGQehJFR4Nr0_rIjOtdtzJ3QFsUcXH8", path: Self.documentedPath),
      "the whole digest is not the truncated signature")
  }

  @Test("with several pairs, a signature of any of them is accepted and the first signs")
  func severalKeys() throws {
    let old = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
    let oldSalt = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"
    let signing = try URLSignature(
      keys: ["736563726574", old], salts: ["68656c6c6f", oldSalt])
    #expect(signing.sign(Self.documentedPath) == "oKfUtW34Dvo2BGQehJFR4Nr0_rIjOtdtzJ3QFsUcXH8")
    // Made by the second pair (checked with Python's hmac module).
    #expect(
      signing.verify(
        signature: "90UxdwGRAI2bpLSHKkZculJau5ahfxfS0h3fMuQAf40", path: Self.documentedPath))
    let newOnly = try URLSignature(keys: ["736563726574"], salts: ["68656c6c6f"])
    #expect(
      !newOnly.verify(
        signature: "90UxdwGRAI2bpLSHKkZculJau5ahfxfS0h3fMuQAf40", path: Self.documentedPath))
  }

  @Test("every wrong shape of signature is refused")
  func tampered() throws {
    let signing = try URLSignature(keys: ["736563726574"], salts: ["68656c6c6f"])
    let right = "oKfUtW34Dvo2BGQehJFR4Nr0_rIjOtdtzJ3QFsUcXH8"
    var flipped = Array(right.utf8)
    flipped[5] ^= 0x01
    let wrongKey = try URLSignature(keys: ["736563726575"], salts: ["68656c6c6f"])
    let shapes: [(String, String)] = [
      ("a flipped bit", String(decoding: flipped, as: UTF8.self)),
      ("truncated", String(right.dropLast())),
      ("padding added", right + "="),
      ("empty", ""),
      ("another path's", signing.sign("/rs:fill:300:401:0/plain/x")),
      ("the wrong key's", wrongKey.sign(Self.documentedPath)),
      ("standard Base64's alphabet", right.replacing("_", with: "/")),
    ]
    for (shape, signature) in shapes {
      #expect(!signing.verify(signature: signature, path: Self.documentedPath), "\(shape)")
    }
    // Percent-encoding changed after signing: the path signed is the one received.
    #expect(
      !signing.verify(
        signature: right, path: Self.documentedPath.replacing("rs:fill", with: "rs%3Afill")))
  }

  @Test("keys and salts that cannot be used are refused with the setting named")
  func settings() {
    #expect(throws: URLSignature.SettingError.self) {
      try URLSignature(keys: [], salts: [])
    }
    #expect(throws: URLSignature.SettingError.self) {
      try URLSignature(keys: ["00", "11"], salts: ["00"])
    }
    #expect(throws: URLSignature.SettingError.self) {
      try URLSignature(keys: ["0g"], salts: ["00"])
    }
    #expect(throws: URLSignature.SettingError.self) {
      try URLSignature(keys: ["abc"], salts: ["00"])
    }
    #expect(throws: URLSignature.SettingError.self) {
      try URLSignature(keys: ["00"], salts: ["00"], size: 33)
    }
  }

  @Test("URL-safe Base64 without padding, as RFC 4648 section 10's vectors (mapped)")
  func base64() {
    for (text, encoded) in [
      ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"),
      ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
    ] {
      #expect(Base64.urlSafe(Array(text.utf8)) == encoded)
    }
    #expect(Base64.urlSafe([0xfb, 0xff]) == "-_8")
  }
}
