import Foundation
import Synchronization

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Fetches http(s) sources through URLSession with a streaming delegate.
///
/// FoundationNetworking on Linux has no `bytes(for:)` and does not enforce
/// `timeoutIntervalForResource`, so this loader keeps its own rules: the body is counted as it
/// streams in and the transfer is cancelled the moment it passes `maxSourceBytes`; the connect
/// (first response) and total deadlines run on our own timers; every redirect hop is checked
/// against the policy again before it is followed. URLCache is off. The response disposition
/// is not trusted to cancel (Linux ignores `.cancel`), so failures cancel the task directly.
final class HTTPDataLoader: Sendable {
  private let policy: SourcePolicy

  init(policy: SourcePolicy) { self.policy = policy }

  func load(_ string: String) async throws -> [UInt8] {
    guard let url = URL(string: string) else { throw FetchError.invalidURL("not a URL") }
    try await SourceLoader.check(url, policy: policy)
    var request = URLRequest(url: url)
    request.cachePolicy = .reloadIgnoringLocalCacheData
    request.timeoutInterval = policy.totalTimeout
    request.setValue("thumbd", forHTTPHeaderField: "User-Agent")
    // One session per transfer: on Linux, cancelling a task leaves libcurl reading its
    // connection to the end (measured: a 1 GiB body was drained after a cancel at 1 MiB);
    // invalidating the session closes the connection at once.
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.httpShouldSetCookies = false
    let delegate = SessionDelegate(policy: policy)
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
    let task = session.dataTask(with: request)
    let transfer = Transfer(task: task, session: session, limit: policy.maxSourceBytes)
    delegate.transfer = transfer
    let timers = Task { [policy] in
      // Our own deadlines: a cancelled sleep means the transfer already ended.
      do {
        try await Task.sleep(nanoseconds: UInt64(policy.connectTimeout * 1e9))
        if !transfer.hasResponse {
          transfer.fail(FetchError.timedOut("no response within \(policy.connectTimeout) s"))
        }
        try await Task.sleep(
          nanoseconds: UInt64(max(0, policy.totalTimeout - policy.connectTimeout) * 1e9))
        transfer.fail(FetchError.timedOut("transfer took longer than \(policy.totalTimeout) s"))
      } catch {}
    }
    defer {
      timers.cancel()
      session.finishTasksAndInvalidate()
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        if transfer.wait(with: continuation) { task.resume() }
      }
    } onCancel: {
      transfer.cancelByConsumer()
    }
  }
}

/// One transfer's state, shared between the awaiting task, the timers and the delegate queue.
final class Transfer: @unchecked Sendable {
  // @unchecked: all mutable state is behind `lock`.
  private let lock = NSLock()
  let task: URLSessionDataTask
  let session: URLSession
  let limit: Int
  private var body: [UInt8] = []
  private var failure: (any Error)?
  private var responded = false
  private var redirects = 0
  private var redirectPending = false
  private var continuation: CheckedContinuation<[UInt8], any Error>?

  /// Registers the caller; false (and the caller answered) when the transfer already failed,
  /// e.g. the consumer left before it started.
  func wait(with continuation: CheckedContinuation<[UInt8], any Error>) -> Bool {
    let earlier = lock.withLock { () -> (any Error)? in
      if let failure { return failure }
      self.continuation = continuation
      return nil
    }
    guard let earlier else { return true }
    continuation.resume(throwing: earlier)
    return false
  }

  init(task: URLSessionDataTask, session: URLSession, limit: Int) {
    self.task = task
    self.session = session
    self.limit = limit
  }

  var hasResponse: Bool { lock.withLock { responded } }

  /// Records the first failure and cancels the transfer; the completion callback reports it.
  /// While a redirect is being checked the cancel waits: URLSession traps if its redirect
  /// handler is answered after a cancel, so the redirect answers nil instead.
  ///
  /// The waiting caller is answered at once: the delegate queue may still hold hundreds of
  /// megabytes of data callbacks that curl read before the cancel reached it, and the caller
  /// must not wait for them.
  func fail(_ error: any Error) {
    let (first, cancelNow, waiting) = lock.withLock {
      () -> (Bool, Bool, CheckedContinuation<[UInt8], any Error>?) in
      guard failure == nil else { return (false, false, nil) }
      failure = error
      let waiting = continuation
      continuation = nil
      return (true, !redirectPending, waiting)
    }
    guard first else { return }
    if cancelNow { session.invalidateAndCancel() }
    waiting?.resume(throwing: error)
  }

  /// Marks a redirect hop under inspection.
  func beginRedirectCheck() { lock.withLock { redirectPending = true } }

  /// Ends the inspection; true when the hop may be followed (nothing failed meanwhile).
  func endRedirectCheck(allowed: Bool, error: (any Error)?) -> Bool {
    lock.withLock {
      redirectPending = false
      if let error, failure == nil { failure = error }
      return allowed && failure == nil
    }
  }

  /// Records a failure without cancelling: for redirect refusals, where URLSession must first
  /// get its completion handler back (cancelling before that traps in FoundationNetworking)
  /// and then finishes the task with the small 3xx response.
  func record(_ error: any Error) {
    lock.withLock { if failure == nil { failure = error } }
  }

  func cancelByConsumer() { fail(CancellationError()) }

  func responded(status: Int, expectedLength: Int64) {
    lock.withLock { responded = true }
    if !(200..<300).contains(status) {
      fail(FetchError.httpStatus(status))
    } else if expectedLength > Int64(limit) {
      fail(FetchError.tooLarge(limit: limit))
    }
  }

  func received(_ data: Data) {
    let over = lock.withLock { () -> Bool in
      guard failure == nil else { return false }
      body.append(contentsOf: data)
      return body.count > limit
    }
    if over { fail(FetchError.tooLarge(limit: limit)) }
  }

  /// Counts a redirect hop; false when there are too many.
  func nextRedirect(max: Int) -> Bool {
    lock.withLock {
      redirects += 1
      return redirects <= max
    }
  }

  func complete(_ error: (any Error)?) {
    let (continuation, result) = lock.withLock {
      () -> (CheckedContinuation<[UInt8], any Error>?, Result<[UInt8], any Error>) in
      let continuation = self.continuation
      self.continuation = nil
      if let failure { return (continuation, .failure(failure)) }
      if let error = error as? URLError {
        switch error.code {
        case .timedOut: return (continuation, .failure(FetchError.timedOut("timed out")))
        case .cancelled: return (continuation, .failure(CancellationError()))
        default:
          return (continuation, .failure(FetchError.transport(error.localizedDescription)))
        }
      }
      if let error { return (continuation, .failure(FetchError.transport("\(error)"))) }
      return (continuation, .success(body))
    }
    continuation?.resume(with: result)
  }
}

/// The delegate of one transfer's session: routes callbacks to the transfer and enforces the
/// policy on redirects.
final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
  // @unchecked: `transfer` is set once before the task resumes; `policy` is immutable.
  private let policy: SourcePolicy
  var transfer: Transfer?

  init(policy: SourcePolicy) { self.policy = policy }

  private func transfer(for task: URLSessionTask) -> Transfer? { transfer }

  func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
  ) {
    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
    transfer(for: dataTask)?.responded(
      status: status, expectedLength: response.expectedContentLength)
    completionHandler(.allow)
  }

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    transfer(for: dataTask)?.received(data)
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask,
    willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
    completionHandler: @escaping (URLRequest?) -> Void
  ) {
    guard let transfer = transfer(for: task), let url = request.url else {
      completionHandler(nil)
      return
    }
    guard transfer.nextRedirect(max: policy.maxRedirects) else {
      transfer.record(FetchError.tooManyRedirects(policy.maxRedirects))
      completionHandler(nil)
      return
    }
    let policy = self.policy
    let handler = UncheckedSendable(completionHandler)
    transfer.beginRedirectCheck()
    Task {
      var failure: (any Error)?
      do {
        try await SourceLoader.check(url, policy: policy)
      } catch {
        failure = error
      }
      let follow = transfer.endRedirectCheck(allowed: failure == nil, error: failure)
      handler.value(follow ? request : nil)
    }
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?
  ) {
    transfer?.complete(error)
  }
}

/// Carries a value URLSession hands us (a completion handler) across a task boundary; the
/// session documents these handlers as callable from any thread.
struct UncheckedSendable<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}
