import CSystem
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The one binder of optional libraries (cs_bind): all of a table's symbols or none, and a
/// message that names what is missing and the package to install.
@Suite("Optional library binder")
struct LibraryBinderTests {
  /// Binds `names` from `soname`; the message on failure.
  private func bind(_ soname: String, _ names: [String]) -> (
    Bool, [UnsafeMutableRawPointer?], String
  ) {
    var addresses = [UnsafeMutableRawPointer?](repeating: nil, count: names.count)
    var error = [CChar](repeating: 0, count: 256)
    let result = addresses.withUnsafeMutableBufferPointer { slots in
      let cNames = names.map { strdup($0)! }
      defer { for name in cNames { free(name) } }
      let symbols = (0..<names.count).map { index in
        cs_symbol(
          name: cNames[index],
          address: slots.baseAddress!.advanced(by: index).withMemoryRebound(
            to: UnsafeMutableRawPointer?.self, capacity: 1
          ) { $0 })
      }
      return cs_bind(soname, "the-package", symbols, symbols.count, nil, &error, error.count)
    }
    let message = String(
      decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return (result == 0, addresses, message)
  }

  @Test("a library's symbols are all found; a missing library or symbol names the package")
  func binds() {
    let found = bind("libz.so.1", ["zlibVersion", "inflate"])
    #expect(found.0 && found.1.allSatisfy { $0 != nil })
    let noLibrary = bind("libthumbd-nowhere.so.9", ["x"])
    #expect(!noLibrary.0)
    #expect(noLibrary.2.contains("cannot load libthumbd-nowhere.so.9 (install the-package)"))
    let noSymbol = bind("libz.so.1", ["zlibVersion", "thumbd_no_such_function"])
    #expect(!noSymbol.0)
    #expect(noSymbol.2.contains("lacks thumbd_no_such_function (install the-package"))
  }
}
