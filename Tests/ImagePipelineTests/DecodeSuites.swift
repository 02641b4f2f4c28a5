import Testing

/// The suites whose tests decode synchronously, for seconds at a time: one at a time between
/// them all, not only within each. A synchronous decode holds a cooperative-pool thread, and
/// on a 2-core machine two such suites side by side held both, so every async test (thumbload's
/// scrolling clients, fetcher deadlines) stalled for tens of seconds. Nested here, they leave
/// the other thread to everything else.
@Suite(.serialized) enum DecodeSuites {}
