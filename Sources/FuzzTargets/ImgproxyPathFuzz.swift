import ImagePipeline
import ThumbServer

extension FuzzTarget {
  /// The imgproxy path form: options, plain and Base64 sources, extensions, signatures.
  static let imgproxyPath = FuzzTarget(
    name: "imgproxy-path",
    covers:
      "the imgproxy path form: a target made of the input splits into signature and signed part that rebuild it, reads to a valid spec and a non-empty source or a 400, and only the signature made for its signed part verifies",
    maxLength: 8192
  ) { bytes in
    let target = "/" + String(decoding: bytes, as: UTF8.self)
    guard let (signature, signed, asked) = ServerFuzzing.imgproxyPath(target) else { return }
    require("/" + signature + signed == target, "the split does not rebuild the target")
    switch asked {
    case .success(let (spec, source)):
      require((try? spec.validate()) != nil, "an invalid spec passed")
      require(!source.isEmpty, "an empty source passed")
    case .failure(let refusal):
      require(refusal.status == 400, "status \(refusal.status)")
    }
    let signing = fuzzSigning
    require(signing.verify(signature: signing.sign(signed), path: signed), "its own signature")
    if signature != signing.sign(signed) {
      require(!signing.verify(signature: signature, path: signed), "a wrong signature verified")
    }
  }
}

/// imgproxy's documented key and salt.
private let fuzzSigning = try! URLSignature(keys: ["736563726574"], salts: ["68656c6c6f"])
