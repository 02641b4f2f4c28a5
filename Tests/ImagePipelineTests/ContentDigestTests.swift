import Testing

@testable import ImagePipeline

/// The digest behind entity tags and source versions: equal for equal bytes, apart for
/// any change, and fixed across processes and builds.
@Suite("Content digest")
struct ContentDigestTests {
  @Test("every single-bit change, in the lanes, the words after them and the tail, moves it")
  func everyBit() {
    for length in [0, 1, 7, 8, 31, 32, 33, 40, 63, 64, 71, 100] {
      let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
      let base = ContentDigest.of(bytes)
      #expect(ContentDigest.of(bytes) == base)
      var seen: Set<UInt64> = [base]
      for index in 0..<length {
        for bit in 0..<8 {
          var changed = bytes
          changed[index] ^= 1 << bit
          seen.insert(ContentDigest.of(changed))
        }
      }
      #expect(seen.count == length * 8 + 1, "length \(length)")
    }
  }

  @Test("the length counts: trailing zero bytes, and lanes swapped, are told apart")
  func lengthAndOrder() {
    let zeros = (0...40).map { ContentDigest.of([UInt8](repeating: 0, count: $0)) }
    #expect(Set(zeros).count == zeros.count)
    let first = [UInt8](repeating: 1, count: 8) + [UInt8](repeating: 2, count: 24)
    let swapped =
      [UInt8](repeating: 2, count: 8) + [UInt8](repeating: 1, count: 8)
      + [UInt8](repeating: 2, count: 16)
    #expect(ContentDigest.of(first) != ContentDigest.of(swapped))
  }

  @Test("the same in every process: a pinned value, so a change of the function is deliberate")
  func pinned() {
    let bytes = Array("thumbd content digest, pinned across releases".utf8)
    #expect(ContentDigest.of(bytes) == 11_382_476_397_444_840_925)
  }
}
