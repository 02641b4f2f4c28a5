import ThumbServer

extension FuzzTarget {
  /// The config file, environment and flag readers of `thumbd serve`.
  static let config = FuzzTarget(
    name: "config",
    covers:
      "ConfigLoader: a config file, and one option's value from the environment and as a flag, give a configuration or a ConfigError; environment and flag agree (list options aside)",
    maxLength: 8192
  ) { bytes in
    var config = DaemonConfig()
    _ = try? ConfigLoader.apply(file: bytes, origin: "fuzz", to: &config)
    // The first byte picks an option (never --config, which would read a file); the rest is
    // its value.
    guard let first = bytes.first else { return }
    let options = ConfigOption.all.filter { $0.key != "config" && !$0.isSwitch }
    let option = options[Int(first) % options.count]
    let value = text(Array(bytes.dropFirst()))
    let fromEnvironment = Result { () throws(ConfigError) -> ConfigLoader.Outcome in
      try ConfigLoader.load(arguments: [], environment: [option.environmentName: value])
    }
    // The same environment for the flag (which overrides it): a value may name environment
    // variables (`$THUMBD_CACHE_DIR`, `${CACHE_DIRECTORY:-...}`), and with the option's own
    // variable set in one run and not the other they expand differently by design.
    let fromFlag = Result { () throws(ConfigError) -> ConfigLoader.Outcome in
      try ConfigLoader.load(
        arguments: [option.flag, value], environment: [option.environmentName: value])
    }
    // A list option's environment variable holds the whole list, its flag one entry.
    guard !option.isList else { return }
    switch (fromEnvironment, fromFlag) {
    case (.success(.serve(let a, _)), .success(.serve(let b, _))):
      require(a == b, "\(option.key): environment and flag disagree")
    case (.failure, .failure), (_, .success(.help)):
      break
    default:
      require(false, "\(option.key)=\(value): environment and flag disagree on validity")
    }
  }
}
