import ImagePipeline
import ThumbWire

#if canImport(Glibc)
  import Glibc
#endif

// Entry point: dispatches to a subcommand. Each command returns its exit status.
// The arguments are taken from argv as bytes: `CommandLine.arguments` would replace a file
// name's bytes that are not UTF-8, and name another file (see `PathBytes`).
let arguments = (1..<Int(CommandLine.argc)).map { index in
  let argument = CommandLine.unsafeArgv[index]!
  return PathBytes.string(UnsafeRawBufferPointer(start: argument, count: strlen(argument)))
}
// First of all: from here on, the daemon's signals are queued for its signal thread.
if arguments.first == "serve" { SignalWaiter.install() }
let status: Int32
switch arguments.first {
case nil, "-h", "--help", "help":
  print(Usage.main)
  status = 0
case "thumbnail":
  status = ThumbnailCommand.run(Array(arguments.dropFirst()))
case "desktop":
  status = DesktopCommand.run(Array(arguments.dropFirst()))
case "sign":
  status = SignCommand.run(Array(arguments.dropFirst()))
case "warm":
  status = await WarmCommand.run(Array(arguments.dropFirst()))
case "serve":
  status = await ServeCommand.run(Array(arguments.dropFirst()))
case "--version":
  // Which HEVC decoder HEIC goes through: FFmpeg's when libavcodec loads, else libde265.
  print("thumbd \(Usage.version)\nHEVC decoder: \(Thumbnailer.hevcDecoder)")
  status = 0
default:
  printError("thumbd: unknown command '\(arguments[0])'\n\n\(Usage.main)")
  status = 2
}
exit(status)
