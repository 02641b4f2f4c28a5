import ThumbProtocol
import ThumbSystem

/// A setting that could not be used: which key, where it came from, and why.
public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The config key at fault, when one is.
  public var key: String?
  /// Where the value came from: a file path, an environment variable or a flag.
  public var origin: String
  /// What is wrong.
  public var message: String

  /// `config key 'memory_limit' (THUMBD_MEMORY_LIMIT): expected ..., got "abc"`.
  public var description: String {
    if let key { return "config key '\(key)' (\(origin)): \(message)" }
    return "\(origin): \(message)"
  }
}

/// Builds a `DaemonConfig` from, in rising precedence: the embedded defaults, a JSON file
/// (`--config` or `THUMBD_CONFIG`), `THUMBD_...` environment variables, and flags.
public enum ConfigLoader {
  /// What the command line asked for.
  public enum Outcome: Sendable {
    /// Serve with this configuration; `file` is the config file read, if any.
    case serve(DaemonConfig, file: String?)
    /// Print help.
    case help
  }

  /// Reads the whole configuration. Paths are expanded (`${NAME:-fallback}`) at the end.
  public static func load(
    arguments: [String], environment: [String: String]
  ) throws(ConfigError) -> Outcome {
    var config = DaemonConfig()
    let flags = FlagScan(arguments)
    if flags.help { return .help }
    if let error = flags.error { throw error }
    let file = flags.configFile ?? environment["THUMBD_CONFIG"]
    if let file {
      guard let data = SystemFiles.read(file, limit: 1 << 20) else {
        throw ConfigError(key: nil, origin: file, message: "cannot read the config file")
      }
      try apply(file: data, origin: file, to: &config)
    }
    for option in ConfigOption.all {
      guard let text = environment[option.environmentName] else { continue }
      try set(option, .text(text), origin: option.environmentName, on: &config)
    }
    try apply(flags.settings, to: &config)
    config.expandPaths(environment: environment)
    return .serve(config, file: file)
  }

  /// Applies a JSON config file: an object whose keys are option keys. Unknown keys are
  /// errors, so a typo never silently leaves a default in place.
  public static func apply(
    file data: [UInt8], origin: String, to config: inout DaemonConfig
  ) throws(ConfigError) {
    guard let object = JSONValue.parse(data) else {
      throw ConfigError(key: nil, origin: origin, message: "not valid JSON")
    }
    guard case .object(let fields) = object else {
      throw ConfigError(key: nil, origin: origin, message: "the top level must be a JSON object")
    }
    for key in fields.keys.sorted() {
      // Keys starting with an underscore are comments.
      if key.hasPrefix("_") { continue }
      guard let option = ConfigOption.named(key) else {
        throw ConfigError(key: key, origin: origin, message: "unknown key")
      }
      try set(option, ConfigValue(json: fields[key]!), origin: origin, on: &config)
    }
  }

  /// The command line read once, left to right, so a flag's value is never taken for a flag
  /// (`--socket --config=x` names a socket, not a config file; found by fuzzing).
  private struct FlagScan {
    var configFile: String?
    var help = false
    /// Each setting flag with its value and the flag as written, in order.
    var settings: [(option: ConfigOption, text: String, origin: String)] = []
    /// The first thing wrong, reported unless help was asked for anywhere.
    var error: ConfigError?

    init(_ arguments: [String]) {
      var index = 0
      while index < arguments.count {
        let argument = arguments[index]
        index += 1
        if argument == "-h" || argument == "--help" {
          help = true
          continue
        }
        var name = argument
        var inline: String?
        if let equals = argument.firstIndex(of: "=") {
          name = String(argument[..<equals])
          inline = String(argument[argument.index(after: equals)...])
        }
        let option = ConfigOption.all.first { $0.flag == name }
        guard name == "--config" || option != nil else {
          let guesses = ConfigOption.near(name).prefix(2)
          let hint =
            guesses.isEmpty ? "" : "; did you mean " + guesses.joined(separator: " or ") + "?"
          error = error ?? ConfigError(key: nil, origin: argument, message: "unknown option" + hint)
          continue
        }
        let text: String
        if let inline {
          text = inline
        } else if option?.isSwitch == true {
          text = "true"
        } else {
          guard index < arguments.count else {
            error =
              error
              ?? ConfigError(
                key: option?.key, origin: name,
                message: name == "--config" ? "needs a file path" : "needs a value")
            break
          }
          text = arguments[index]
          index += 1
        }
        if let option {
          settings.append((option, text, name))
        } else {
          configFile = text
        }
      }
    }
  }

  private static func apply(
    _ settings: [(option: ConfigOption, text: String, origin: String)],
    to config: inout DaemonConfig
  ) throws(ConfigError) {
    var listsSeen: Set<String> = []
    for (option, text, origin) in settings {
      if let field = option.listField, listsSeen.contains(option.key) {
        // A repeated list flag adds to what the earlier ones gave.
        let earlier = config[keyPath: field]
        try set(option, .text(text), origin: origin, on: &config)
        config[keyPath: field] = earlier + config[keyPath: field]
      } else {
        listsSeen.insert(option.key)
        try set(option, .text(text), origin: origin, on: &config)
      }
    }
  }

  private static func set(
    _ option: ConfigOption, _ value: ConfigValue, origin: String, on config: inout DaemonConfig
  ) throws(ConfigError) {
    guard option.apply(&config, value) else {
      throw ConfigError(
        key: option.key, origin: origin, message: "expected \(option.expects), got \(value.shown)")
    }
  }

  /// Expands `$NAME`, `${NAME}` and `${NAME:-fallback}` (fallbacks may nest) from `environment`.
  public static func expand(_ text: String, environment: [String: String]) -> String {
    var output = ""
    var rest = Substring(text)
    while let dollar = rest.firstIndex(of: "$") {
      output += rest[..<dollar]
      rest = rest[rest.index(after: dollar)...]
      if rest.first == "{" {
        rest = rest.dropFirst()
        // Find the matching brace, counting nested `${`.
        var depth = 1
        var end = rest.startIndex
        while end < rest.endIndex {
          if rest[end] == "{" { depth += 1 }
          if rest[end] == "}" {
            depth -= 1
            if depth == 0 { break }
          }
          end = rest.index(after: end)
        }
        let inner = rest[..<end]
        rest = end < rest.endIndex ? rest[rest.index(after: end)...] : ""
        if let marker = inner.firstRange(of: ":-") {
          let name = String(inner[..<marker.lowerBound])
          if let value = environment[name], !value.isEmpty {
            output += value
          } else {
            output += expand(String(inner[marker.upperBound...]), environment: environment)
          }
        } else {
          output += environment[String(inner)] ?? ""
        }
      } else {
        let name = rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" }
        if name.isEmpty {
          output += "$"
        } else {
          output += environment[String(name)] ?? ""
          rest = rest.dropFirst(name.count)
        }
      }
    }
    return output + rest
  }
}

extension DaemonConfig {
  /// Expands environment references in the path settings.
  mutating func expandPaths(environment: [String: String]) {
    socket = ConfigLoader.expand(socket, environment: environment)
    cacheDir = ConfigLoader.expand(cacheDir, environment: environment)
    logFile = ConfigLoader.expand(logFile, environment: environment)
    caFile = ConfigLoader.expand(caFile, environment: environment)
    caPath = ConfigLoader.expand(caPath, environment: environment)
    fileRoots = fileRoots.map { ConfigLoader.expand($0, environment: environment) }
  }
}
