import Synchronization
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// What a `thumbnail` run tells its user: a line per failure, a progress line while it works
/// (only when standard error is a terminal), and a summary at the end.
final class RunReport: Sendable {
  /// Why an input made no thumbnail without failing.
  enum Skip: CaseIterable {
    /// `--skip-existing` found its output.
    case existing
    /// The daemon had it already (`thumbd warm`).
    case cached
    /// Found by a directory walk, and not an image format thumbd reads.
    case notImage
    /// The same file reached twice (named twice, or through a link).
    case duplicate
    /// A link back to a directory above it: not walked again.
    case loop
    /// A link out of the walked tree: not followed.
    case outsideTree
    /// A failure entry in the desktop's cache says this version cannot be thumbnailed.
    case failedBefore

    var words: String {
      switch self {
      case .existing: "existing"
      case .cached: "already cached"
      case .notImage: "not images"
      case .duplicate: "duplicates"
      case .loop: "directory loops"
      case .outsideTree: "links out of the tree"
      case .failedBefore: "failed before"
      }
    }
  }

  private struct State {
    var made = 0
    var failed: [String: Int] = [:]
    var skipped: [Skip: Int] = [:]
    var lastDraw = 0.0
    var lineShown = false

    var done: Int { made + failed.values.reduce(0, +) + skipped.values.reduce(0, +) }
  }

  private let state = Mutex(State())
  private let total: Int
  private let started = MonotonicClock.seconds()
  private let showsProgress: Bool
  private let verbose: Bool
  private let command: String

  /// `total` counts every input the run will account for. Progress is drawn when `progress`
  /// is true and standard error is a terminal.
  init(command: String, total: Int, progress: Bool, verbose: Bool) {
    self.command = command
    self.total = total
    self.showsProgress = progress && isatty(STDERR_FILENO) == 1
    self.verbose = verbose
  }

  /// A thumbnail written (`output` is nil for standard output).
  func made(_ input: String, _ output: String?) {
    state.withLock { state in
      state.made += 1
      if verbose { emit("\(input) -> \(output ?? "standard output")", &state) }
      drawIfDue(&state)
    }
  }

  /// A failure, printed as `PATH: KIND: message`.
  func failed(_ input: String, kind: String, message: String) {
    state.withLock { state in
      state.failed[kind, default: 0] += 1
      emit("\(input): \(kind): \(message)", &state)
      drawIfDue(&state)
    }
  }

  /// A warning about an input that still made its thumbnail.
  func warning(_ input: String, _ message: String) {
    state.withLock { state in emit("\(input): warning: \(message)", &state) }
  }

  /// An input skipped; said only with `--verbose`.
  func skipped(_ input: String, _ reason: Skip, count: Int = 1) {
    state.withLock { state in
      state.skipped[reason, default: 0] += count
      if verbose && !input.isEmpty { emit("\(input): skipped (\(reason.words))", &state) }
      drawIfDue(&state)
    }
  }

  /// Reports what the walk set aside: unreadable paths as failures, duplicates and links back
  /// up as skipped (a warning names each link).
  func account(for inputs: InputList) {
    for problem in inputs.problems {
      failed(problem.path, kind: "io", message: problem.message)
    }
    if inputs.duplicates > 0 { skipped("", .duplicate, count: inputs.duplicates) }
    for loop in inputs.loops {
      warning(loop, "not walked: a link leads back to a directory above it")
      skipped("", .loop)
    }
    for link in inputs.outside { skipped(link, .outsideTree) }
  }

  /// Prints the summary, unless `quiet`; a run of one input says enough by its output or
  /// its error line (as cp does), so its summary comes only with `--verbose`.
  func finish(quiet: Bool) {
    if !quiet && (total > 1 || verbose) { printError(summary()) }
  }

  /// Whether any input failed.
  var anyFailed: Bool { state.withLock { !$0.failed.isEmpty } }

  /// How many files the run skipped as not images, when that is all it did: nothing made,
  /// failed or skipped for another reason. nil otherwise.
  var onlyNotImages: Int? {
    state.withLock { state in
      guard state.made == 0, state.failed.isEmpty, let count = state.skipped[.notImage],
        state.skipped.count == 1
      else { return nil }
      return count
    }
  }

  /// The last line: made, failed by kind, skipped by reason, seconds.
  private func summary() -> String {
    state.withLock { state in
      clearLine(&state)
      return Self.summary(
        command: command, made: state.made, failed: state.failed, skipped: state.skipped,
        seconds: MonotonicClock.seconds() - started)
    }
  }

  static func summary(
    command: String, made: Int, failed: [String: Int], skipped: [Skip: Int], seconds: Double
  ) -> String {
    let failedCount = failed.values.reduce(0, +)
    let skippedCount = skipped.values.reduce(0, +)
    var text = "\(command): \(made) made, \(failedCount) failed"
    if failedCount > 0 {
      let kinds = failed.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
      text += " (" + kinds.joined(separator: ", ") + ")"
    }
    text += ", \(skippedCount) skipped"
    if skippedCount > 0 {
      let reasons = Skip.allCases.compactMap { reason in
        skipped[reason].map { "\($0) \(reason.words)" }
      }
      text += " (" + reasons.joined(separator: ", ") + ")"
    }
    return text + ", " + formatted(seconds, decimals: 1) + " s"
  }

  /// Prints a line; a path in it whose bytes are not UTF-8 shows them as `\xNN`.
  private func emit(_ line: String, _ state: inout State) {
    clearLine(&state)
    printError(PathBytes.display(line))
  }

  private func clearLine(_ state: inout State) {
    guard state.lineShown else { return }
    writeError("\r\u{1B}[K")
    state.lineShown = false
  }

  /// At most four progress lines a second, redrawn in place.
  private func drawIfDue(_ state: inout State) {
    guard showsProgress else { return }
    let now = MonotonicClock.seconds()
    guard now - state.lastDraw >= 0.25 else { return }
    state.lastDraw = now
    let done = state.done
    let elapsed = max(now - started, 0.001)
    let rate = Double(done) / elapsed
    var line = "\r\u{1B}[K\(command): \(done)/\(total)"
    let failed = state.failed.values.reduce(0, +)
    if failed > 0 { line += ", \(failed) failed" }
    line += ", " + Self.formatted(rate, decimals: 1) + "/s"
    if rate > 0 && done < total {
      line += ", about " + Self.duration(Double(total - done) / rate) + " left"
    }
    writeError(line)
    state.lineShown = true
  }

  /// `h:mm:ss` or `m:ss`.
  static func duration(_ seconds: Double) -> String {
    let whole = Int(seconds.rounded(.up))
    let (hours, minutes, secs) = (whole / 3600, whole / 60 % 60, whole % 60)
    let twoDigits = { (value: Int) in value < 10 ? "0\(value)" : "\(value)" }
    return hours > 0
      ? "\(hours):\(twoDigits(minutes)):\(twoDigits(secs))" : "\(minutes):\(twoDigits(secs))"
  }

  static func formatted(_ value: Double, decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = Int((value * scale).rounded())
    let whole = scaled / Int(scale)
    let fraction = scaled % Int(scale)
    guard decimals > 0 else { return "\(whole)" }
    let digits = String(fraction)
    return "\(whole)." + String(repeating: "0", count: decimals - digits.count) + digits
  }
}

/// Writes text to standard error as it is, in one write(2).
func writeError(_ text: String) {
  let bytes = Array(text.utf8)
  bytes.withUnsafeBytes { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
}
