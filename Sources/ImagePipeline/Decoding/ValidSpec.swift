/// A `ThumbnailSpec` that has passed `validate()`: the only way to make one is to check it, so
/// code that takes a `ValidSpec` never checks again. The parsers of requests (the HTTP query
/// and path forms, the session's `load`, the CLI's options) make one; the pipeline and the
/// `Thumbnailer` pass it on. The codec still checks its own plan at the C boundary.
@dynamicMemberLookup
public struct ValidSpec: Sendable, Hashable {
  /// The checked spec.
  public let spec: ThumbnailSpec

  /// Checks `spec`; throws `invalidSpec` when a field is out of range.
  public init(_ spec: ThumbnailSpec) throws(ThumbnailError) {
    try spec.validate()
    self.spec = spec
  }

  /// The spec's fields, read through.
  public subscript<Value>(dynamicMember field: KeyPath<ThumbnailSpec, Value>) -> Value {
    spec[keyPath: field]
  }
}
