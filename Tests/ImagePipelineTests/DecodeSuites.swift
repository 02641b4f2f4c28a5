import Foundation
import Testing

@testable import TestSupport

/// The suites whose tests decode synchronously, for seconds at a time: one at a time between
/// them all, not only within each, on a thread of their own (`ThreadLane.decoding`). A
/// synchronous decode on the cooperative pool holds one of its threads, and on a 2-core
/// machine these suites held one for the whole run (seven minutes of decoding), while the
/// in-process pipelines, event loops and `eventually` waits of every other test shared the
/// other: under load they stalled past their bounds.
@Suite(.serialized, .onLane(.decoding)) enum DecodeSuites {}

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
