extension StringProtocol {
  /// Without leading and trailing spaces, tabs and line ends (what Foundation's
  /// `trimmingCharacters(in: .whitespaces)` was used for).
  public func trimmingWhitespace() -> SubSequence {
    func isSpace(_ character: Character) -> Bool {
      character == " " || character == "\t" || character == "\r" || character == "\n"
    }
    guard let first = firstIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
    let last = lastIndex(where: { !isSpace($0) })!
    return self[first...last]
  }

  /// The text padded with spaces on the right to at least `width` characters.
  public func padded(to width: Int) -> String {
    String(self) + String(repeating: " ", count: Swift.max(0, width - count))
  }
}
