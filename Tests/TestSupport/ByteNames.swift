import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Files whose names are bytes, not necessarily UTF-8 (Foundation's file calls take
/// `String`s, which cannot spell them).
public enum ByteNames {
  /// Writes `data` to a new file whose path is `path`'s bytes; false if it cannot.
  public static func write(_ data: Data, to path: [UInt8]) -> Bool {
    let fd = (path.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer {
      open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    }
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == data.count
  }

  /// The names in the folder `path`, as bytes (`.` and `..` left out).
  public static func names(in path: String) -> [[UInt8]] {
    guard let folder = opendir(path) else { return [] }
    defer { closedir(folder) }
    var names: [[UInt8]] = []
    while let entry = readdir(folder) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
      if name != [UInt8(ascii: ".")] && name != Array("..".utf8) { names.append(name) }
    }
    return names
  }
}
