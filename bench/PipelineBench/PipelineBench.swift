import Foundation
import ImagePipeline

/// Pipeline micro-benchmarks (issue 3). Run on a release build:
///   swift run -c release pipeline-bench [PHOTO]
/// Every figure is paired with a peer measured in the same run, and reported as a ratio.
/// `main` is not on the main actor, as a server's handlers are not: from the main actor every
/// async call would pay two thread hops that have nothing to do with the pipeline.
@main
struct PipelineBench {
  /// Answers every URL with the same photo, instantly.
  struct InstantLoader: DataLoading {
    let bytes: [UInt8]
    func load(_ request: SourceRequest) async throws -> SourceResponse {
      .modified(bytes, .unversioned())
    }
  }

  static func seconds(
    isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> Void
  ) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    let d = start.duration(to: .now).components
    return Double(d.seconds) + Double(d.attoseconds) / 1e18
  }

  static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

  static func row(_ name: String, _ ours: String, _ peer: String, _ ratio: Double) {
    print("| \(name) | \(ours) | \(peer) | \(String(format: "%.2f", ratio)) |")
  }

  static func main() async throws {
    // The entry point runs on the main actor; the measurements must not.
    try await Task.detached { try await run() }.value
  }

  static func run() async throws {
    let path = CommandLine.arguments.dropFirst().first ?? "../shared/corpus/photo/coil/normal.jpg"
    guard let data = FileManager.default.contents(atPath: path) else {
      fatalError("cannot read \(path)")
    }
    let photo = Array(data)
    var sink = 0
    print("| measure | thumbd | peer in the same run | ratio |")
    print("|---|---:|---|---:|")

    let only = ProcessInfo.processInfo.environment["BENCH_ONLY"].flatMap(Int.init)
    if only == nil || only == 1 {
      // 1. Memory cache get at 10k entries, against NSCache (which we chose not to use).
      let entries = 10_000
      let lookups = 1_000_000
      let cache = MemoryCache<Int, Int>(
        costLimit: Int.max, countLimit: entries, maxEntryFraction: 1)
      let nscache = NSCache<NSNumber, NSNumber>()
      nscache.countLimit = entries
      for key in 0..<entries {
        cache.setValue(key, forKey: key, cost: 1)
        nscache.setObject(NSNumber(value: key), forKey: NSNumber(value: key))
      }
      let keys = (0..<lookups).map { _ in Int.random(in: 0..<entries) }
      let nsKeys = keys.map { NSNumber(value: $0) }
      var ours: [Double] = []
      var theirs: [Double] = []
      for _ in 0..<5 {
        ours.append(await seconds { for key in keys { sink &+= cache.value(forKey: key) ?? 0 } })
        theirs.append(
          await seconds {
            for key in nsKeys { sink &+= nscache.object(forKey: key)?.intValue ?? 0 }
          })
      }
      let getNs = median(ours) / Double(lookups) * 1e9
      let nsGetNs = median(theirs) / Double(lookups) * 1e9
      row(
        "memory cache get, 10k entries, random keys", String(format: "%.0f ns", getNs),
        String(format: "NSCache get: %.0f ns", nsGetNs), getNs / nsGetNs)

    }
    if only == nil || only == 2 {
      // 2. The async API's overhead for a memory hit, against a direct cache lookup.
      let pipeline = ThumbnailPipeline(
        configuration: .init(dataLoader: InstantLoader(bytes: photo)))
      let request = ImageRequest(
        url: "bench/photo.jpg", spec: try ValidSpec(ThumbnailSpec(width: 128, height: 128)))
      _ = try await pipeline.response(for: request)
      let hits = 200_000
      var asyncRuns: [Double] = []
      var directRuns: [Double] = []
      for _ in 0..<5 {
        asyncRuns.append(
          try await seconds {
            for _ in 0..<hits { sink &+= try await pipeline.response(for: request).thumbnail.width }
          })
        directRuns.append(
          await seconds {
            for _ in 0..<hits { sink &+= pipeline.memoryCache.value(forKey: request)?.width ?? 0 }
          })
      }
      let hitNs = median(asyncRuns) / Double(hits) * 1e9
      let directNs = median(directRuns) / Double(hits) * 1e9
      row(
        "`response(for:)` memory hit", String(format: "%.0f ns", hitNs),
        String(format: "direct MemoryCache lookup: %.0f ns", directNs), hitNs / directNs)

    }
    if only == nil || only == 3 {
      // 3. 1000 concurrent requests for one cold item, end to end, against one request alone.
      var coalescedRuns: [Double] = []
      var singleRuns: [Double] = []
      for round in 0..<5 {
        let cold = ImageRequest(
          url: "bench/cold-\(round).jpg",
          spec: try ValidSpec(ThumbnailSpec(width: 128, height: 128)))
        let fresh = ThumbnailPipeline(configuration: .init(dataLoader: InstantLoader(bytes: photo)))
        coalescedRuns.append(
          try await seconds {
            try await withThrowingTaskGroup(of: Int.self) { group in
              for _ in 0..<1000 {
                group.addTask { try await fresh.response(for: cold).thumbnail.width }
              }
              for try await width in group { sink &+= width }
            }
          })
        let counts = fresh.metrics.snapshot()
        precondition(counts.decodes == 1 && counts.originFetches == 1, "not coalesced")
        let alone = ThumbnailPipeline(configuration: .init(dataLoader: InstantLoader(bytes: photo)))
        singleRuns.append(
          try await seconds { sink &+= try await alone.response(for: cold).thumbnail.width })
      }
      let coalescedMs = median(coalescedRuns) * 1e3
      let singleMs = median(singleRuns) * 1e3
      row(
        "1000 concurrent requests, one cold item (1 fetch, 1 decode)",
        String(format: "%.1f ms", coalescedMs),
        String(format: "one request alone: %.1f ms", singleMs),
        coalescedMs / singleMs)
    }
    if sink == 42 { print("") }  // keeps the optimiser from dropping the loops
  }
}
