import ImagePipeline
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// `thumbd thumbnail`: many inputs, one process, a pool of worker threads.
enum ThumbnailCommand {
  /// Parsed command line of `thumbd thumbnail`.
  struct Options {
    var inputs: [String] = []
    var spec = ThumbnailSpec(width: 0, height: 0)
    var output: String?
    var jobs = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    var thumbnailer = Thumbnailer()
  }

  /// Runs the command and returns its exit status (0, 1 or 2).
  static func run(_ arguments: [String]) -> Int32 {
    let options: Options
    do {
      guard let parsed = try parse(arguments) else {
        print(Usage.thumbnail)
        return 0
      }
      options = parsed
    } catch {
      printError("thumbd thumbnail: \(error.message)\nRun 'thumbd thumbnail --help' for usage.")
      return 2
    }
    let targets: [String]
    do {
      targets = try OutputPlan.targets(for: options.inputs, output: options.output!)
    } catch {
      printError("thumbd thumbnail: \(error.message)")
      return 2
    }
    let failures = Atomic<Int>(0)
    let next = Atomic<Int>(0)
    let work: @Sendable () -> Void = {
      while true {
        let index = next.add(1, ordering: .relaxed).oldValue
        guard index < options.inputs.count else { return }
        if !process(options.inputs[index], into: targets[index], options: options) {
          failures.add(1, ordering: .relaxed)
        }
      }
    }
    WorkerThreads.run(count: max(1, min(options.jobs, options.inputs.count)), work)
    return failures.load(ordering: .relaxed) == 0 ? 0 : 1
  }

  /// Makes one thumbnail; reports a failure on stderr and returns false.
  private static func process(_ input: String, into target: String, options: Options) -> Bool {
    do {
      let thumbnail = try options.thumbnailer.thumbnail(contentsOf: input, spec: options.spec)
      if thumbnail.damageWarnings > 0 {
        printError(
          "\(input): warning: damaged data accepted (\(thumbnail.damageWarnings) decoder warnings)")
      }
      let path = OutputPlan.resolve(target, format: thumbnail.format)
      try AtomicFileWriter.write(thumbnail.data, to: path)
      return true
    } catch {
      printError("\(input): \(error.kind): \(error.message)")
      return false
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
      case "--jobs", "-j":
        options.jobs = try cursor.integer(for: argument, in: 1...1024)
      case "--output", "-o":
        options.output = try cursor.value(for: argument)
      default:
        if argument.name.hasPrefix("-") && argument.name != "-" {
          throw UsageError(message: "unknown option '\(argument.name)'")
        }
        options.inputs.append(argument.name)
      }
    }
    guard !options.inputs.isEmpty else { throw UsageError(message: "no INPUT files given") }
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

/// Walks `--name value`, `--name=value` and positional arguments.
struct ArgumentCursor {
  /// One argument: its name and, for `--name=value`, the inline value.
  struct Argument {
    let name: String
    let inlineValue: String?
  }

  private var remaining: ArraySlice<String>
  private var positionalOnly = false

  init(_ arguments: [String]) { remaining = arguments[...] }

  mutating func next() -> Argument? {
    guard let raw = remaining.popFirst() else { return nil }
    if positionalOnly { return Argument(name: raw, inlineValue: nil) }
    if raw == "--" {
      positionalOnly = true
      return next()
    }
    if raw.hasPrefix("--"), let equals = raw.firstIndex(of: "=") {
      return Argument(
        name: String(raw[..<equals]), inlineValue: String(raw[raw.index(after: equals)...]))
    }
    return Argument(name: raw, inlineValue: nil)
  }

  mutating func value(for argument: Argument) throws(ThumbnailCommand.UsageError) -> String {
    if let inline = argument.inlineValue { return inline }
    guard let value = remaining.popFirst() else {
      throw ThumbnailCommand.UsageError(message: "\(argument.name) needs a value")
    }
    return value
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
