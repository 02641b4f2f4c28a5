import ImagePipeline
import Sandbox
import Synchronization
import ThumbSystem
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

/// `thumbd thumbnail`: many inputs (directories walked, or a list on standard input), one
/// process, a pool of worker threads.
enum ThumbnailCommand {
  /// Parsed command line of `thumbd thumbnail`.
  struct Options: BatchOptions {
    var inputs: [String] = []
    var spec = ThumbnailSpec(width: 0, height: 0)
    /// `--format` as given; nil when the output's name decides.
    var explicitFormat: OutputFormat?
    var output: String?
    var jobs = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    var thumbnailer = Thumbnailer()
    var keepPaths = false
    var skipExisting = false
    var nulSeparated = false
    var quiet = false
    var verbose = false
  }

  /// The whole run, decided before any work.
  private struct Plan: Sendable {
    let files: [InputList.File]
    let targets: [OutputPlan.Target]
    let toStandardOutput: Bool
    let inputIdentities: Set<InputList.Identity>
  }

  /// Runs the command and returns its exit status (0, 1 or 2).
  static func run(_ arguments: [String]) -> Int32 {
    var options: Options
    let plan: Plan
    let inputs: InputList
    do {
      guard let parsed = try parse(arguments) else {
        print(Usage.thumbnail)
        return 0
      }
      options = parsed
      (plan, inputs) = try makePlan(&options)
    } catch {
      printError("thumbd thumbnail: \(error.message)\nRun 'thumbd thumbnail --help' for usage.")
      return 2
    }
    // Videos' frames come from the sandboxed worker, set up when the first video comes.
    options.thumbnailer.frames = LazyVideoFrames(
      environment: SystemFiles.environment,
      deadline: .seconds(options.thumbnailer.limits.decodeTimeout))
    let report = options.report("thumbd thumbnail", jobs: plan.files.count, inputs: inputs)
    let next = Atomic<Int>(0)
    let settings = options
    let work: @Sendable () -> Void = {
      while true {
        let index = next.add(1, ordering: .relaxed).oldValue
        guard index < plan.files.count else { return }
        process(index, plan: plan, options: settings, report: report)
      }
    }
    WorkerThreads.run(count: max(1, min(options.jobs, plan.files.count)), work)
    report.finish(quiet: options.quiet)
    // Folders holding no images are the usage error an empty folder is, not a success.
    if let skipped = report.onlyNotImages {
      printError(
        "thumbd thumbnail: the inputs hold no images (\(skipped) "
          + (skipped == 1 ? "file" : "files")
          + " skipped: not images)\nRun 'thumbd thumbnail --help' for usage.")
      return 2
    }
    return report.anyFailed ? 1 : 0
  }

  /// Expands the inputs and decides every output.
  private static func makePlan(
    _ options: inout Options
  ) throws(UsageError) -> (Plan, InputList) {
    let arguments = try InputList.expandingLists(
      options.inputs, nulSeparated: options.nulSeparated)
    let destination = OutputPlan.destination(of: options.output!)
    var excluded: InputList.Identity?
    if case .directory(let directory) = destination {
      try OutputPlan.makeDirectories(directory)
      excluded = InputList.Identity(directory)
    }
    let inputs = InputList(arguments, excluding: excluded)
    let single = { (name: String) throws(UsageError) in
      guard inputs.files.count + inputs.problems.count == 1 && !inputs.hadDirectory else {
        throw UsageError(
          message: "\(name) takes one input, and there are "
            + (inputs.hadDirectory ? "directories" : "\(inputs.files.count)")
            + "; to write many, give --output a directory (end it with /)")
      }
    }
    let targets: [OutputPlan.Target]
    switch destination {
    case .standardOutput:
      try single("--output -")
      targets = [OutputPlan.Target(path: "-", addsExtension: false)]
      options.spec.format = options.explicitFormat ?? .auto
    case .file(let path):
      try single("--output \(path)")
      options.spec.format = try OutputPlan.fileFormat(path, explicit: options.explicitFormat)
      try OutputPlan.makeDirectories(SystemFiles.parent(of: path))
      targets = [OutputPlan.Target(path: path, addsExtension: false)]
    case .directory(let directory):
      options.spec.format = options.explicitFormat ?? .auto
      targets = OutputPlan.targets(for: inputs.files, in: directory, keepPaths: options.keepPaths)
    }
    guard
      inputs.files.count + inputs.problems.count + inputs.loops.count + inputs.duplicates
        + inputs.outside.count > 0
    else {
      throw UsageError(message: "the inputs hold no files")
    }
    let plan = Plan(
      files: inputs.files, targets: targets, toStandardOutput: destination == .standardOutput,
      inputIdentities: inputs.identities)
    return (plan, inputs)
  }

  /// Makes one thumbnail and reports what became of it.
  private static func process(_ index: Int, plan: Plan, options: Options, report: RunReport) {
    let file = plan.files[index]
    let target = plan.targets[index]
    if options.skipExisting && !plan.toStandardOutput {
      for candidate in target.candidates(options.spec.format)
      where PathBytes.withCString(candidate, { access($0, F_OK) }) == 0 {
        report.skipped(file.path, .existing)
        return
      }
    }
    do throws(ThumbnailError) {
      let thumbnail = try options.thumbnailer.thumbnail(
        .path(file.path), spec: ValidSpec(options.spec))
      if thumbnail.damageWarnings > 0 {
        report.warning(
          file.path, "damaged data accepted (\(thumbnail.damageWarnings) decoder warnings)")
      }
      if plan.toStandardOutput {
        try writeAll(thumbnail.data, to: STDOUT_FILENO)
        report.made(file.path, nil)
        return
      }
      let path = target.resolved(thumbnail.format)
      if let existing = InputList.Identity(path), plan.inputIdentities.contains(existing) {
        throw ThumbnailError.io("\(path) is one of the inputs; it is not replaced")
      }
      guard SystemFiles.makeDirectories(SystemFiles.parent(of: path)) else {
        throw ThumbnailError.io(
          "cannot create the directory \(SystemFiles.parent(of: path)): "
            + SystemFiles.describe(errno))
      }
      try AtomicFileWriter.write(thumbnail.data, to: path)
      report.made(file.path, path)
    } catch {
      if file.walked, case .unsupportedFormat = error {
        report.skipped(file.path, .notImage)
      } else {
        report.failed(file.path, kind: error.kind, message: error.message)
      }
    }
  }

  /// Writes every byte to `fd`, retrying short writes.
  private static func writeAll(_ bytes: [UInt8], to fd: Int32) throws(ThumbnailError) {
    var offset = 0
    while offset < bytes.count {
      let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else {
        throw .io("cannot write to standard output: \(SystemFiles.describe(errno))")
      }
      offset += n
    }
  }

  /// A usage error with the sentence to print.
  struct UsageError: Error {
    let message: String
  }

  /// Returns nil when help was asked for.
  static func parse(_ arguments: [String]) throws(UsageError) -> Options? {
    var options = Options()
    var sizeSeen = false
    var cursor = ArgumentCursor(arguments)
    while let argument = cursor.next() {
      if try SpecOptions.parse(argument, &cursor, into: &options.spec) {
        if argument.name == "--size" { sizeSeen = true }
        if argument.name == "--format" { options.explicitFormat = options.spec.format }
        continue
      }
      switch argument.name {
      case "-h", "--help":
        return nil
      case "--filter":
        let value = try cursor.value(for: argument)
        guard let filter = ResamplingFilter(rawValue: value) else {
          let names = ResamplingFilter.allCases.map(\.rawValue).joined(separator: ", ")
          throw UsageError(message: "--filter expects one of \(names)")
        }
        options.thumbnailer.filter = filter
      case "--accept-damaged":
        options.thumbnailer.limits.acceptDamaged = true
      case "--full-decode":
        options.thumbnailer.shrinkOnLoad = false
      case "--avif-speed":
        options.thumbnailer.avifSpeed = try cursor.integer(for: argument, in: 0...9)
      case "--max-pixels":
        options.thumbnailer.limits.maxPixels = try cursor.integer(for: argument, in: 1...Int.max)
      case "--decode-timeout":
        let value = try cursor.value(for: argument)
        guard let seconds = Double(value), seconds >= 0, seconds <= 31_536_000 else {
          throw UsageError(message: "--decode-timeout expects seconds (0 for none), got '\(value)'")
        }
        options.thumbnailer.limits.decodeTimeout = seconds
      case "--output", "-o":
        options.output = try cursor.value(for: argument)
      case "--keep-paths":
        options.keepPaths = true
      case "--skip-existing":
        options.skipExisting = true
      default:
        guard try options.takeShared(argument, &cursor) else {
          throw UsageError(message: "unknown option '\(argument.name)'")
        }
      }
    }
    options.inputs += cursor.operands
    guard !options.inputs.isEmpty else { throw UsageError(message: "no INPUT given") }
    guard sizeSeen else { throw UsageError(message: "--size is required") }
    guard options.output != nil else { throw UsageError(message: "--output is required") }
    do {
      try options.spec.validate()
    } catch {
      throw UsageError(message: error.message)
    }
    return options
  }
}

/// The options every batch command (`thumbnail`, `warm`, `desktop`) shares: inputs, `--jobs`,
/// `--null`, `--quiet`, `--verbose`, parsed in one place.
protocol BatchOptions {
  var inputs: [String] { get set }
  var jobs: Int { get set }
  var nulSeparated: Bool { get set }
  var quiet: Bool { get set }
  var verbose: Bool { get set }
}

extension BatchOptions {
  /// Takes `argument` if it is one of the shared options, or an input (anything not starting
  /// with `-`, and `-` itself); false for any other option, which the command handles.
  mutating func takeShared(
    _ argument: ArgumentCursor.Argument, _ cursor: inout ArgumentCursor
  ) throws(ThumbnailCommand.UsageError) -> Bool {
    switch argument.name {
    case "--jobs", "-j": jobs = try cursor.integer(for: argument, in: 1...1024)
    case "-0", "--null": nulSeparated = true
    case "-q", "--quiet": quiet = true
    case "-v", "--verbose": verbose = true
    default:
      guard !argument.name.hasPrefix("-") || argument.name == "-" else { return false }
      inputs.append(argument.name)
    }
    return true
  }

  /// The run's report for `command`: `jobs` pieces of work, and `inputs`' files set aside
  /// (already counted).
  func report(_ command: String, jobs: Int, inputs: InputList) -> RunReport {
    let report = RunReport(
      command: command, total: jobs + inputs.setAside, progress: !quiet, verbose: verbose)
    report.account(for: inputs)
    return report
  }
}

/// Walks `--name value`, `--name=value` and positional arguments.
struct ArgumentCursor {
  /// One argument: its name and, for `--name=value`, the inline value.
  struct Argument {
    let name: String
    let inlineValue: String?
  }

  private var remaining: ArraySlice<String>
  /// What followed `--`: inputs whatever they look like (`-photo.jpg`, `--size`), never
  /// options. The command adds them to its inputs after the options.
  private(set) var operands: [String] = []

  init(_ arguments: [String]) { remaining = arguments[...] }

  mutating func next() -> Argument? {
    guard let raw = remaining.popFirst() else { return nil }
    if raw == "--" {
      operands += remaining
      remaining = []
      return nil
    }
    if raw.hasPrefix("--"), let equals = raw.firstIndex(of: "=") {
      return Argument(
        name: String(raw[..<equals]), inlineValue: String(raw[raw.index(after: equals)...]))
    }
    return Argument(name: raw, inlineValue: nil)
  }

  /// The next argument as it is, whatever it looks like (an option's value); nil at the end.
  mutating func rawNext() -> String? { remaining.popFirst() }

  mutating func value(for argument: Argument) throws(ThumbnailCommand.UsageError) -> String {
    if let inline = argument.inlineValue { return inline }
    guard let value = remaining.popFirst() else {
      throw ThumbnailCommand.UsageError(message: "\(argument.name) needs a value")
    }
    return value
  }

  /// The case of `Choice` the argument's value names.
  mutating func choice<Choice: NamedChoice>(
    for argument: Argument
  ) throws(ThumbnailCommand.UsageError) -> Choice {
    let value = try self.value(for: argument)
    guard let choice = Choice(rawValue: value) else {
      throw ThumbnailCommand.UsageError(
        message: "\(argument.name) expects \(Choice.names), got '\(value)'")
    }
    return choice
  }

  mutating func integer(
    for argument: Argument, in range: ClosedRange<Int>
  ) throws(ThumbnailCommand.UsageError) -> Int {
    let value = try self.value(for: argument)
    guard let number = Int(value), range.contains(number) else {
      throw ThumbnailCommand.UsageError(
        message: "\(argument.name) expects an integer in \(range), got '\(value)'")
    }
    return number
  }
}
