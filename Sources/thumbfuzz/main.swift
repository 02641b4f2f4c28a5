import FuzzTargets
import ThumbSystem

#if canImport(Glibc)
  import Glibc
#endif

// thumbfuzz: runs the fuzz targets of Sources/FuzzTargets.
//
//   thumbfuzz list                      the targets: name, max length, seed globs, what each
//                                       checks (tab-separated)
//   thumbfuzz run TARGET PATH...        replays files (or every file of directories)
//   thumbfuzz fuzz TARGET [ARGS...]     libFuzzer with ARGS (a build by scripts/fuzz only)
//
// `run` needs no fuzzing runtime: the tests and CI replay the kept inputs through it with an
// ordinary build.

let arguments = Array(CommandLine.arguments.dropFirst())

/// Writes a line on standard error.
func complain(_ message: String) {
  let line = Array("thumbfuzz: \(message)\n".utf8)
  _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
  complain(message)
  exit(2)
}

/// `path` itself if it is a file, else the files in the directory, sorted.
func files(at path: String) -> [String] {
  guard let names = SystemFiles.list(path) else { return [path] }
  return names.filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
}

func target(_ name: String?) -> FuzzTarget {
  guard let name, let target = FuzzTarget.named(name) else {
    fail("name a target: \(FuzzTarget.all.map(\.name).joined(separator: ", "))")
  }
  return target
}

switch arguments.first {
case "list":
  for target in FuzzTarget.all {
    // Name, longest input, seed globs (space-separated, "-" for none), what it covers.
    let globs = target.seedExtensions.map { "*." + $0 }.joined(separator: " ")
    print("\(target.name)\t\(target.maxLength)\t\(globs.isEmpty ? "-" : globs)\t\(target.covers)")
  }
case "run":
  let chosen = target(arguments.dropFirst().first)
  var inputs = 0
  for path in arguments.dropFirst(2) {
    for file in files(at: path) {
      guard let bytes = SystemFiles.read(file, limit: 1 << 24) else { fail("cannot read \(file)") }
      chosen.run(bytes)
      inputs += 1
    }
  }
  print("\(chosen.name): \(inputs) inputs, every invariant held")
case "fuzz":
  LibFuzzer.run(target(arguments.dropFirst().first), arguments: Array(arguments.dropFirst(2)))
default:
  fail("usage: thumbfuzz list | run TARGET PATH... | fuzz TARGET [LIBFUZZER ARGS...]")
}
