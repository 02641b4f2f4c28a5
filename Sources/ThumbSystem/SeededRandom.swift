/// A small seeded generator (SplitMix64): the same seed gives the same sequence on every run
/// and machine, for thumbload's scrolling and origin and for randomised tests that must replay
/// exactly. Not for anything that needs unpredictability.
public struct SeededRandom: RandomNumberGenerator, Sendable {
  private var state: UInt64

  /// A generator starting from `seed`.
  public init(seed: UInt64) { state = seed }

  /// The next 64 bits.
  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A double in [0, 1).
  public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
