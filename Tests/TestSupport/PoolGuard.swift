import Foundation
import Testing
import ThumbSystem

/// Fails a test that blocks a thread of the test process's cooperative pool.
///
/// Every test of the process shares that pool, a thread per core (two on the CI machine),
/// with the in-process daemons and pipelines under test. A test that blocks one of its
/// threads in a socket read or a sandbox's run holds it from all of them: two such tests at
/// once stop every other test's daemon, and their clients time out far from the cause. The
/// blocking calls say so (`CooperativePool.willBlock`); here such a call made on the pool is
/// an issue of the test that made it. Run blocking work on a lane (`.onLane(_:)`), off the
/// pool (`offPool`, `SystemThread.run`) or through the async API.
///
/// Installed by the helpers most tests start with (`TestDaemon.start`, `eventually`, the
/// sandboxes' fixtures), once for the process.
enum PoolGuard {
  /// Touch it to install the guard.
  static let installed: Void = {
    CooperativePool.onBlocking { call in
      // A call from a task that carries no test (a detached one) is named by its callers.
      let callers =
        Test.current == nil
        ? "; called from " + Thread.callStackSymbols.prefix(40).joined(separator: " <- ") : ""
      Issue.record(
        """
        \(call) blocked a thread of the cooperative pool, which every test's daemons, \
        pipelines and origins share: run it on a lane (.onLane), off the pool (offPool) or \
        through the async API\(callers)
        """)
    }
  }()
}
