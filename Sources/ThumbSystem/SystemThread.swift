import CSystem

#if canImport(Glibc)
  import Glibc
#endif

/// POSIX threads for blocking work (codecs, name lookups, event loops), named for `top -H`
/// and perf. Not Foundation's `Thread`: the daemon and the CLI do not load Foundation, whose
/// libraries alone cost about 10 MiB of resident memory in every process.
public final class SystemThread: @unchecked Sendable {
  // @unchecked: `handle` is written once, before any other thread can see the object.
  private var handle = pthread_t()

  private final class Body {
    let name: String
    let run: () -> Void
    init(name: String, run: @escaping () -> Void) {
      self.name = name
      self.run = run
    }
  }

  private init() {}

  /// Starts `body` on a new thread that nobody waits for.
  public static func detach(
    name: String, stackSize: Int = 0, _ body: @escaping @Sendable () -> Void
  ) {
    guard let thread = start(name: name, stackSize: stackSize, body) else {
      fatalError("cannot start thread \(name): \(String(cString: strerror(errno)))")
    }
    pthread_detach(thread.handle)
  }

  /// Runs blocking `body` (file I/O, a wait) on a new thread and waits for it without holding
  /// one of the cooperative pool's few threads; its result or error comes back to the caller.
  public static func run<T: Sendable, E: Error>(
    name: String, _ body: @escaping @Sendable () throws(E) -> T
  ) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { continuation in
      detach(name: name) { continuation.resume(returning: Result { () throws(E) in try body() }) }
    }
    return try result.get()
  }

  /// Starts `body` on a new thread; `join()` waits for it. Nil if the system refused.
  public static func start(
    name: String, stackSize: Int = 0, _ body: @escaping @Sendable () -> Void
  ) -> SystemThread? {
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    if stackSize > 0 { pthread_attr_setstacksize(&attributes, stackSize) }
    let thread = SystemThread()
    let context = Unmanaged.passRetained(Body(name: name, run: body)).toOpaque()
    let status = pthread_create(
      &thread.handle, &attributes,
      { context in
        let body = Unmanaged<Body>.fromOpaque(context!).takeRetainedValue()
        // Named from inside: the name must be set on the thread itself to be reliable.
        ts_name_thread(body.name)
        body.run()
        return nil
      }, context)
    guard status == 0 else {
      Unmanaged<Body>.fromOpaque(context).release()
      errno = status
      return nil
    }
    return thread
  }

  /// Waits until the thread's body has returned. Call once.
  public func join() { pthread_join(handle, nil) }
}

/// A mutex with a condition variable, for threads that wait for work (what NSCondition was).
public final class ConditionLock: @unchecked Sendable {
  // @unchecked: the pthread objects are designed for use from many threads.
  private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
  private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

  /// Creates an unlocked lock.
  public init() {
    pthread_mutex_init(mutex, nil)
    var attributes = pthread_condattr_t()
    pthread_condattr_init(&attributes)
    // Timed waits measure the monotonic clock, unaffected by wall-clock changes.
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
    pthread_cond_init(condition, &attributes)
    pthread_condattr_destroy(&attributes)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    condition.deallocate()
    mutex.deallocate()
  }

  /// Takes the lock.
  public func lock() { pthread_mutex_lock(mutex) }

  /// Gives the lock back.
  public func unlock() { pthread_mutex_unlock(mutex) }

  /// Runs `body` holding the lock.
  public func withLock<T>(_ body: () throws -> T) rethrows -> T {
    lock()
    defer { unlock() }
    return try body()
  }

  /// Waits for a signal, with the lock held; the lock is held again on return.
  public func wait() { pthread_cond_wait(condition, mutex) }

  /// Waits at most `seconds` for a signal, with the lock held; false on time-out.
  @discardableResult
  public func wait(seconds: Double) -> Bool {
    var deadline = timespec()
    clock_gettime(CLOCK_MONOTONIC, &deadline)
    let nanos = Int(deadline.tv_nsec) + Int((max(0, seconds) * 1e9).rounded())
    deadline.tv_sec += nanos / 1_000_000_000
    deadline.tv_nsec = nanos % 1_000_000_000
    return pthread_cond_timedwait(condition, mutex, &deadline) == 0
  }

  /// Wakes one waiter.
  public func signal() { pthread_cond_signal(condition) }

  /// Wakes every waiter.
  public func broadcast() { pthread_cond_broadcast(condition) }
}
