/// The bits of HTTP's grammar that both the server's request parser and the fetcher's
/// response parser need, in one place.
public enum HTTPSyntax {
  /// RFC 9110 `tchar`: a byte allowed in a token (a method, a header name).
  public static func isTokenByte(_ b: UInt8) -> Bool {
    switch b {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"):
      return true
    default:
      return "!#$%&'*+-.^_`|~".utf8.contains(b)
    }
  }
}
