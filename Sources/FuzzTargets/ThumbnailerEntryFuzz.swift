import Sandbox

extension FuzzTarget {
  /// Installed `*.thumbnailer` entries: any file in a thumbnailers folder may be an attack.
  static let thumbnailerEntry = FuzzTarget(
    name: "thumbnailer-entry",
    covers:
      "installed .thumbnailer entries: an accepted entry has a program, an input and the output, a bounded list of type/subtype MIME types, and its expansion keeps one argument per Exec argument whatever the paths hold",
    maxLength: ThumbnailerEntry.maxBytes + 16
  ) { bytes in
    guard let entry = try? ThumbnailerEntry.parse(bytes, source: "fuzz") else { return }
    require(bytes.count <= ThumbnailerEntry.maxBytes, "accepted \(bytes.count) bytes")
    require(
      !entry.arguments.isEmpty && entry.arguments.count <= ThumbnailerEntry.maxArguments,
      "\(entry.arguments.count) arguments")
    require(!entry.program.isEmpty && !entry.program.contains("%"), "program \(entry.program)")
    require(entry.arguments.contains { $0.contains("%o") }, "no output")
    require(entry.arguments.contains { $0.contains("%i") || $0.contains("%u") }, "no input")
    require(
      !entry.mimeTypes.isEmpty && entry.mimeTypes.count <= ThumbnailerEntry.maxTypes,
      "\(entry.mimeTypes.count) types")
    for type in entry.mimeTypes {
      require(type.split(separator: "/", omittingEmptySubsequences: false).count == 2, type)
      require(type == type.lowercased(), type)
    }
    // Hostile paths: spaces, quotes, a shell's characters and a field code of their own.
    let input = "/thumbd/a b\"c'$(x);%o`|.png"
    let expanded = entry.expand(input: input, output: "/thumbd/out/%i t.png", size: 128)
    require(expanded.count == entry.arguments.count, "expansion changed the argument count")
    require(expanded[0] == entry.program, "the program changed")
  }
}
