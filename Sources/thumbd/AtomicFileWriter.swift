import ImagePipeline

/// Writes a file so readers see either the old file or the whole new one, never a part.
enum AtomicFileWriter {
  /// Writes `bytes` to a temporary file beside `path`, then renames it into place.
  static func write(_ bytes: [UInt8], to path: String) throws(ThumbnailError) {
    do {
      try FileIO.writeAtomically(bytes, to: path, temporaryTemplate: path + ".tmp-XXXXXX")
    } catch {
      throw .io(error.message)
    }
  }
}
