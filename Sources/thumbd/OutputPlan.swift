import ImagePipeline
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

/// Where each input's thumbnail goes.
enum OutputPlan {
  /// A target is either an exact file path or a directory plus base name awaiting its extension.
  static let extensionPlaceholder = ".{ext}"

  /// One target per input. Fails when two inputs would write the same file.
  static func targets(
    for inputs: [String], output: String
  ) throws(ThumbnailCommand.UsageError) -> [String] {
    if inputs.count == 1 && !isDirectory(output) && !output.hasSuffix("/") {
      try makeDirectories(SystemFiles.parent(of: output))
      return [output]
    }
    try makeDirectories(output)
    var seen: [String: String] = [:]
    var targets: [String] = []
    for input in inputs {
      let name = baseName(input)
      if let earlier = seen[name] {
        throw ThumbnailCommand.UsageError(
          message: "'\(earlier)' and '\(input)' would both write \(name).*; rename one")
      }
      seen[name] = input
      targets.append(joined(output, name) + extensionPlaceholder)
    }
    return targets
  }

  /// Replaces the extension placeholder with the format's extension.
  static func resolve(_ target: String, format: ImageFormat) -> String {
    guard target.hasSuffix(extensionPlaceholder) else { return target }
    return String(target.dropLast(extensionPlaceholder.count)) + "." + format.fileExtension
  }

  static func baseName(_ path: String) -> String {
    let file =
      path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
    guard let dot = file.lastIndex(of: "."), dot != file.startIndex else { return file }
    return String(file[..<dot])
  }

  private static func joined(_ directory: String, _ name: String) -> String {
    directory.hasSuffix("/") ? directory + name : directory + "/" + name
  }

  private static func isDirectory(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
  }

  /// `mkdir -p`.
  private static func makeDirectories(_ path: String) throws(ThumbnailCommand.UsageError) {
    guard SystemFiles.makeDirectories(path) else {
      throw ThumbnailCommand.UsageError(
        message: "cannot create directory \(path): \(SystemFiles.describe(errno))")
    }
  }
}
