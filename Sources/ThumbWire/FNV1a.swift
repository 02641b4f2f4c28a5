/// FNV-1a: the one home of the fast, stable, non-cryptographic hash thumbd uses wherever a
/// name or checksum must be the same across runs and machines: disk cache file names and
/// checksums, client identities, log digests of source URLs, the CLI's output names, and the
/// ready responses' head keys. Never for anything an attacker must not be able to collide
/// (signatures use `SHA256`).
public struct FNV1a: Sendable {
  /// The 64-bit offset basis, the usual seed.
  public static let basis: UInt64 = 0xCBF2_9CE4_8422_2325
  /// The 64-bit prime.
  public static let prime: UInt64 = 0x100_0000_01B3

  @usableFromInline var state: UInt64

  /// The hash so far.
  @inlinable public var value: UInt64 { state }

  /// A hash starting from `seed`.
  @inlinable public init(seed: UInt64 = basis) { state = seed }

  /// Adds one byte.
  @inlinable public mutating func combine(_ byte: UInt8) {
    state = (state ^ UInt64(byte)) &* Self.prime
  }

  /// Adds bytes in order.
  @inlinable public mutating func combine(_ bytes: some Sequence<UInt8>) {
    for byte in bytes { combine(byte) }
  }

  /// The 64-bit hash of `bytes` from `seed`.
  @inlinable public static func hash(_ bytes: some Sequence<UInt8>, seed: UInt64 = basis) -> UInt64
  {
    var hash = FNV1a(seed: seed)
    hash.combine(bytes)
    return hash.value
  }

  /// The 32-bit variant (basis 0x811C9DC5, prime 0x01000193), for short names.
  @inlinable public static func hash32(_ bytes: some Sequence<UInt8>) -> UInt32 {
    var hash: UInt32 = 0x811C_9DC5
    for byte in bytes { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
    return hash
  }

  /// A faster variant over 8-byte words (the length folded into the seed, each word's product
  /// mixed down by a shift), then the tail byte by byte: for keys of long byte strings on a
  /// hot path, where only speed and spread matter, never stability across versions.
  @inlinable public static func words(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    var hash = basis ^ UInt64(bytes.count)
    var offset = 0
    while offset + 8 <= bytes.count {
      hash = (hash ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* prime
      hash ^= hash >> 29
      offset += 8
    }
    while offset < bytes.count {
      hash = (hash ^ UInt64(bytes[offset])) &* prime
      offset += 1
    }
    return hash
  }
}
