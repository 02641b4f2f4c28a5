import Foundation

/// Large Adam7 PNGs written row by row by Debian's Python (zlib, streamed), so that the test
/// process never holds the image: a 10000x10000 grey or 16-bit RGBA picture of gradients and
/// stripes, in the seven passes of the interlace.
enum InterlacedPNG {
  static let script = #"""
    import struct, sys, zlib
    path, width, height, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    channels, depth, colour = {"grey": (1, 8, 0), "rgba16": (4, 16, 6)}[kind]
    def chunk(out, tag, data):
        out.write(struct.pack(">I", len(data)) + tag + data)
        out.write(struct.pack(">I", zlib.crc32(tag + data) & 0xffffffff))
    starts = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    size = channels * depth // 8
    def full_row(y):
        # One sample pattern a row; rows differ in stripes of 64.
        shift = (y // 64 % 2) * 60
        values = [(x * 255 // width + shift) % 256 for x in range(width)]
        if depth == 8:
            return bytes(values)
        out = bytearray()
        for v in values:
            for c in range(channels):
                out += struct.pack(">H", (v + c * 40) % 256 * 257)
        return bytes(out)
    rows = [full_row(0), full_row(64)]
    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n")
        chunk(out, b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 1))
        packer = zlib.compressobj(1)
        pending = b""
        for x0, y0, dx, dy in starts:
            if x0 >= width:
                continue
            passes = [b"".join(r[i * size:(i + 1) * size] for i in range(x0, width, dx)) if size > 1 else r[x0::dx] for r in rows]
            for y in range(y0, height, dy):
                pending += packer.compress(b"\x00" + passes[y // 64 % 2])
                if len(pending) > 1 << 20:
                    chunk(out, b"IDAT", pending)
                    pending = b""
        pending += packer.flush()
        chunk(out, b"IDAT", pending)
        chunk(out, b"IEND", b"")
    """#

  /// Writes the picture to `path`; `kind` is "grey" or "rgba16".
  static func write(_ path: String, width: Int, height: Int, kind: String) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", script, path, String(width), String(height), kind]
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw POSIXError(.EIO) }
  }
}
