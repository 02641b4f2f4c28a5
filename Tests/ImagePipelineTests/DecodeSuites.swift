import Foundation
import Testing

@testable import TestSupport

/// The suites whose tests decode synchronously, for seconds at a time, on threads of their own
/// (`ThreadLane.decoding`). A synchronous decode on the cooperative pool holds one of its
/// threads, and on a 2-core machine these suites held one for the whole run (seven minutes of
/// decoding), while the in-process pipelines, event loops and `eventually` waits of every
/// other test shared the other: under load they stalled past their bounds. Two groups, each
/// one test at a time, run side by side on the lane's two threads.
@Suite(.onLane(.decoding)) enum DecodeSuites {
  /// JPEG and PNG: the corpus manifest, resampling quality, colour, restart bands, previews,
  /// hostile images, and the memory estimates of every format (measured in child processes).
  @Suite(.serialized) enum Photos {}
  /// The other formats: HEIF planes, JPEG XL, TIFF, camera RAW, BMP and ICO, and their
  /// corpus manifests.
  @Suite(.serialized) enum Formats {}
}

extension DecodeSuites {
  @Suite("Decode suites' thread")
  struct LaneTests {
    @Test("a synchronous test of these suites runs on the decoding lane, not a pool thread")
    func synchronousOnLane() {
      #expect(ThreadLane.decoding.runsCaller())
    }

    @Test("so does an asynchronous one, after it has waited")
    func asynchronousOnLane() async throws {
      try await Task.sleep(for: .milliseconds(1))
      #expect(ThreadLane.decoding.runsCaller())
    }
  }
}
