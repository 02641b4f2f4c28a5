import FuzzTargets

#if canImport(Glibc)
  import Glibc
#endif

/// Hands a target to libFuzzer's driver. Only a build with `-DTHUMBD_FUZZING` (scripts/fuzz)
/// links libFuzzer; any other build says so and stops.
enum LibFuzzer {
  #if THUMBD_FUZZING
    /// The target libFuzzer calls back into; set once before the driver starts.
    nonisolated(unsafe) static var current: FuzzTarget?

    static func run(_ target: FuzzTarget, arguments: [String]) -> Never {
      current = target
      var all = [CommandLine.arguments[0]]
      if !arguments.contains(where: { $0.hasPrefix("-max_len=") }) {
        all.append("-max_len=\(target.maxLength)")
      }
      all += arguments
      var pointers = all.map { strdup($0) } + [nil]
      var count = Int32(all.count)
      let status = pointers.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var base = buffer.baseAddress!
        return libFuzzerRunDriver(&count, &base) { data, size in
          let bytes = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
          LibFuzzer.current?.run(bytes)
          return 0
        }
      }
      exit(status)
    }
  #else
    static func run(_ target: FuzzTarget, arguments: [String]) -> Never {
      complain("this build has no libFuzzer; build with scripts/fuzz (run replays)")
      exit(2)
    }
  #endif
}

#if THUMBD_FUZZING
  /// libFuzzer's entry point for programs with their own main (`libclang_rt.fuzzer_no_main`).
  @_silgen_name("LLVMFuzzerRunDriver")
  func libFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
  ) -> Int32
#endif
