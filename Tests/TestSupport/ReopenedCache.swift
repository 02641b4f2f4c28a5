import ImagePipeline
import Testing

/// Opens the disk cache in `directory` again, as a restart would, once the cache that had it
/// has let go of its lock. A cache's lock is released when the last reference to it goes, and
/// the last one can be its own serial queue finishing a job a moment after the test's scope
/// ended (seen on a loaded machine): a second cache then (rightly) finds the directory in use.
/// A daemon's restart is a new process, so only tests in one process need to wait.
func reopenedCache(_ directory: String, sizeLimit: Int) async -> DiskCache? {
  var reopened: DiskCache?
  await eventually("the first cache released \(directory)") {
    reopened = try? DiskCache(directory: directory, sizeLimit: sizeLimit)
    return reopened != nil
  }
  return reopened
}
