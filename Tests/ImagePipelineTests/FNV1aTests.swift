import Testing
import ThumbSystem
import ThumbWire

@testable import ImagePipeline

/// The one FNV-1a: the published vectors, and the disk cache's file names, which must not
/// change between versions (a changed name is a cache emptied on upgrade).
@Suite("FNV-1a")
struct FNV1aTests {
  @Test("the published 64- and 32-bit vectors")
  func vectors() {
    #expect(FNV1a.hash([UInt8]()) == 0xCBF2_9CE4_8422_2325)
    #expect(FNV1a.hash("a".utf8) == 0xAF63_DC4C_8601_EC8C)
    #expect(FNV1a.hash("foobar".utf8) == 0x8594_4171_F739_67E8)
    #expect(FNV1a.hash32("a".utf8) == 0xE40C_292C)
    var parts = FNV1a()
    parts.combine("foo".utf8)
    parts.combine("bar".utf8)
    #expect(parts.value == FNV1a.hash("foobar".utf8), "combining in parts is combining at once")
  }

  @Test("a disk cache entry's file name is the one earlier versions gave it")
  func stableFileName() {
    let key =
      "thumb-v4|lanczos3-area|-|64x64|1.0|contain|auto|q80|noup|srgb|https://example.com/a.jpg"
    #expect(DiskCacheEntry.fileName(for: key) == "55e50255b12090ea049ca5d5a812f925.tdc")
  }
}
