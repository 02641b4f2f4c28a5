import CSystem

/// The process's own resident memory, for a memory budget that bounds the process and not only
/// its work (`PipelineConfiguration.processMemory`).
///
/// What the budget counts (decode estimates, source bytes, the memory cache) is not all a
/// process holds: its code and the decoders' libraries become resident as each is first used
/// (about 40 MiB once HEIF, AVIF and WebP have run), and the allocator keeps some of what work
/// freed. The budget reads the resident size when a decode ends, and whatever of it the work
/// and the cache do not explain, beyond `allowance`, it takes from the room it gives work (at
/// most half the limit). The figure is the highest seen since the last idle trim, which reads
/// it again afresh (`AllocatorTrim`).
public struct ProcessMemory: Sendable {
  /// Bytes of the process's own memory the budget leaves uncounted.
  public var allowance: Int
  /// The process's resident bytes now; negative when unknown.
  public var resident: @Sendable () -> Int

  /// Counts what `resident` reads beyond `allowance`.
  public init(allowance: Int, resident: @escaping @Sendable () -> Int) {
    self.allowance = allowance
    self.resident = resident
  }

  /// This process's resident memory (`/proc/self/statm`), beyond `allowance`.
  public static func thisProcess(allowance: Int) -> ProcessMemory {
    ProcessMemory(allowance: allowance) { Int(ts_resident_bytes()) }
  }
}
