import ThumbSystem

/// A file's MIME type from its name, as the shared MIME-info database's `globs2` says
/// (`weight:type:glob[:flags]`), for callers that are given no type (`thumbd desktop`; the
/// D-Bus service is told the type by its caller). The highest weight wins, then the longest
/// pattern; a pattern is case-insensitive unless its flags say `cs`.
///
/// Only the patterns a name can be matched against without a glob engine are kept: a literal
/// name, and `*` followed by a literal suffix (nearly all of them). The files are read with
/// bounds: at most 4 MiB each and 65,536 patterns in all.
package struct MediaTypeGlobs: Sendable {
  struct Pattern: Sendable {
    let weight: Int
    let type: String
    /// The suffix after `*`, or the whole name; lower-cased unless case-sensitive.
    let text: String
    let isSuffix: Bool
    let caseSensitive: Bool
  }

  private var patterns: [Pattern] = []

  /// No patterns: no name has a type until some are added.
  package init() {}

  /// The most patterns kept.
  static let maxPatterns = 65_536

  /// The `mime/globs2` files of the XDG data folders (`$XDG_DATA_HOME`, then
  /// `$XDG_DATA_DIRS`), read in that order.
  package static func load(environment: [String: String]) -> MediaTypeGlobs {
    var globs = MediaTypeGlobs()
    for folder in SystemFiles.dataFolders(environment: environment) {
      if let bytes = SystemFiles.read(folder + "/mime/globs2", limit: 4 << 20) {
        globs.add(String(decoding: bytes, as: UTF8.self))
      }
    }
    return globs
  }

  /// Adds the patterns of one `globs2` file's text.
  package mutating func add(_ text: String) {
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
      guard patterns.count < Self.maxPatterns else { return }
      let fields = line.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
      guard fields.count >= 3, let weight = Int(fields[0]), (0...100).contains(weight) else {
        continue
      }
      let type = fields[1].lowercased()
      let glob = String(fields[2])
      let flags = fields.count > 3 ? fields[3].split(separator: ",") : []
      guard type.split(separator: "/").count == 2, !glob.isEmpty else { continue }
      let special: Set<Character> = ["*", "?", "["]
      let isSuffix = glob.hasPrefix("*")
      let text = isSuffix ? String(glob.dropFirst()) : glob
      guard !text.isEmpty, !text.contains(where: special.contains) else { continue }
      patterns.append(
        Pattern(
          weight: weight, type: type, text: flags.contains("cs") ? text : text.lowercased(),
          isSuffix: isSuffix, caseSensitive: flags.contains("cs")))
    }
  }

  /// The type of a file named `name` (its last path component), or nil.
  package func type(ofName name: String) -> String? {
    let lowered = name.lowercased()
    var best: Pattern?
    for pattern in patterns {
      let subject = pattern.caseSensitive ? name : lowered
      let matches = pattern.isSuffix ? subject.hasSuffix(pattern.text) : subject == pattern.text
      guard matches else { continue }
      if let current = best,
        (current.weight, current.text.count) >= (pattern.weight, pattern.text.count)
      {
        continue
      }
      best = pattern
    }
    return best?.type
  }
}
