import Synchronization

/// True for the first caller only.
final class Once: Sendable {
  private let done = Mutex(false)

  func claim() -> Bool {
    done.withLock { was in
      defer { was = true }
      return !was
    }
  }
}

/// Runs `operation` unstructured and waits for it on a continuation, at most `seconds`: its
/// result, or nil when it has not finished by then (it goes on; the test's gate lets it end
/// later). For expectations that something is answered "at once" without a test hanging
/// when it is not.
func within<T: Sendable>(
  _ seconds: Double, _ operation: @escaping @Sendable () async throws -> T
) async -> Result<T, any Error>? {
  let once = Once()
  return await withCheckedContinuation { continuation in
    Task {
      let result: Result<T, any Error>
      do { result = .success(try await operation()) } catch { result = .failure(error) }
      if once.claim() { continuation.resume(returning: result) }
    }
    Task {
      try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
      if once.claim() { continuation.resume(returning: nil) }
    }
  }
}
