import Loopback
import Testing
import ThumbSystem

@testable import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// `CooperativePool` and the tests' `PoolGuard`: a blocking call made on the cooperative pool
/// fails the test that made it, and the same call elsewhere does not.
@Suite("Blocking calls and the cooperative pool")
struct PoolGuardTests {
  /// A lane of this suite's own: the shared ones may be busy with long tests.
  static let lane = ThreadLane(threads: 1, name: "test-guard")

  @Test("a test's task runs on the pool; a lane's task and a thread of its own do not")
  func whereCallerRuns() async {
    #expect(CooperativePool.runsCaller)
    let onLane = await Task(executorPreference: Self.lane) { CooperativePool.runsCaller }.value
    #expect(!onLane)
    let onThread = await SystemThread.run(name: "test-guard") { CooperativePool.runsCaller }
    #expect(!onThread)
  }

  @Test("a socket read on the pool is the test's issue; the same read off the pool is not")
  func blockingReadRecorded() async throws {
    PoolGuard.installed
    var ends: [Int32] = [-1, -1]
    try #require(pipe(&ends) == 0)
    let reader = ends[0]
    defer { close(reader) }
    close(ends[1])  // the read ends at once: nothing waits
    withKnownIssue("a read on the pool") {
      _ = SocketClient.readToEnd(reader)
    }
    let offPoolRead = try await offPool { SocketClient.readToEnd(reader) }
    #expect(offPoolRead.isEmpty)
    let onLane = Task(executorPreference: Self.lane) { SocketClient.readToEnd(reader) }
    #expect(await onLane.value.isEmpty)
  }
}
