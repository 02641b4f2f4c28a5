import ImagePipeline
import ThumbWire

extension FuzzTarget {
  /// The source URL parser and reference resolution.
  static let sourceURL = FuzzTarget(
    name: "source-url",
    covers:
      "SourceURL: a parsed URL prints as text that parses to the same URL, with no space, control byte or user info; resolving a reference (after the first newline) against it gives such a URL too; a file URL's path, written back as GLib writes a URI, reads as the same bytes; any bytes kept as a path (PathBytes) come back exactly",
    maxLength: 4096
  ) { bytes in
    let path = PathBytes.string(bytes)
    require(PathBytes.bytes(path) == bytes, "\(bytes) does not come back from PathBytes")
    let parts = bytes.split(separator: 10, maxSplits: 1, omittingEmptySubsequences: false)
    guard let base = try? SourceURL(text(Array(parts[0]))) else { return }
    check(base)
    if parts.count > 1, let resolved = try? base.resolving(text(Array(parts[1]))) {
      check(resolved)
    }
  }

  private static func check(_ url: SourceURL) {
    let printed = url.description
    require(printed.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "\(printed) has raw bytes")
    require((try? SourceURL(printed)) == url, "\(printed) does not parse back to itself")
    require(url.host == url.host.lowercased(), "host \(url.host) not lowercased")
    // A decoded `.` or `..` segment (spelled `%2e`) is refused by the file loader, not read.
    if url.scheme == "file", let path = url.filePath, path.hasPrefix("/"),
      !PathBytes.segments(path).contains(where: PathBytes.isDotSegment)
    {
      let uri = PercentEncoding.fileURI(path: path)
      let back = (try? SourceURL(uri))?.filePath.map(PathBytes.bytes)
      require(back == PathBytes.bytes(path), "\(uri) does not read back as \(printed)'s path")
    }
    // A host with a colon can only be an IPv6 literal.
    if url.host.contains(":") { require(url.hostAddress != nil, "host \(url.host)") }
  }
}
