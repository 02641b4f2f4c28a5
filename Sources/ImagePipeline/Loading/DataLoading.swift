/// Fetches the encoded bytes of a source. Implementations must honour task cancellation: the
/// pipeline cancels a fetch when its last subscriber leaves.
public protocol DataLoading: Sendable {
  /// The whole body of `url`, or a `FetchError`.
  func loadData(for url: String) async throws -> [UInt8]
}
