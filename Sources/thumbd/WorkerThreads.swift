#if canImport(Glibc)
  import Glibc
#endif

/// Plain POSIX threads for blocking C work, so the thread count is exactly what `--jobs` says.
enum WorkerThreads {
  private final class Body {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
  }

  /// Runs `body` on `count` threads (the caller's thread is one of them) and waits for all.
  static func run(count: Int, _ body: @escaping @Sendable () -> Void) {
    var threads: [pthread_t] = []
    for _ in 1..<max(1, count) {
      var thread = pthread_t()
      let context = Unmanaged.passRetained(Body(body)).toOpaque()
      let created = pthread_create(
        &thread, nil,
        { context in
          Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
          return nil
        }, context)
      if created == 0 {
        threads.append(thread)
      } else {
        Unmanaged<Body>.fromOpaque(context).release()
      }
    }
    body()
    for thread in threads { pthread_join(thread, nil) }
  }
}
