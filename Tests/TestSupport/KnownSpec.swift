import ImagePipeline

extension ValidSpec {
  /// A spec a test writes out and knows to be valid, checked without a `try` (in the closures
  /// `ImageSlot` and `PrefetchCoordinator` take, which cannot throw). A spec that is not valid
  /// stops the test run: the test is wrong.
  public static func known(_ spec: ThumbnailSpec) -> ValidSpec {
    do {
      return try ValidSpec(spec)
    } catch {
      preconditionFailure("a test's spec is not valid: \(error.message)")
    }
  }
}
