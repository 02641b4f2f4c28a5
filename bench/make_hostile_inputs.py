#!/usr/bin/env python3
"""Writes the big hostile inputs of issue 17 into a directory, for bench/hostile_inputs.sh.

They mirror Tests/TestSupport/HostileInputs.swift, which builds the same
inputs in memory for the tests (too big to commit: 27 MB and 256 MB).
Usage: make_hostile_inputs.py OUT_DIR PROGRESSIVE_JPEG ARITHMETIC_PROGRESSIVE_JPEG PHOTO_JPEG
"""
import struct
import sys
import zlib

SIG = b"\x89PNG\r\n\x1a\n"


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


class Bits:
    """LSB-first bit writer, as DEFLATE packs bits."""

    def __init__(self):
        self.out, self.acc, self.n = bytearray(), 0, 0

    def put(self, value, count):
        for i in range(count):
            self.acc |= ((value >> i) & 1) << self.n
            self.n += 1
            if self.n == 8:
                self.out.append(self.acc)
                self.acc, self.n = 0, 0

    def code(self, code, length):  # Huffman codes go MSB first
        for i in range(length - 1, -1, -1):
            self.put((code >> i) & 1, 1)


def trailing_zeros(gray, gib=4):
    """A 1x1 PNG whose zlib stream goes on with `gib` GiB of zeros after its only row."""
    row = bytes([0, 0] if gray else [0, 200, 100, 0])
    copies = 6 + 8 * 4000
    bits = Bits()
    bits.put(0, 1)
    bits.put(1, 2)
    for _ in range(copies):
        bits.code(0b11000101, 8)  # length 258
        bits.code(0, 5)  # distance 1
    bits.code(0, 7)
    per_block = 258 * copies
    blocks = (gib << 30) // per_block
    a, b = 1, 0
    for x in row:
        a = (a + x) % 65521
        b = (b + a) % 65521
    b = (b + per_block * blocks * a) % 65521
    stream = (b"\x78\x01\x00" + struct.pack("<HH", len(row), len(row) ^ 0xFFFF) + row
              + bytes(bits.out) * blocks + b"\x01\x00\x00\xff\xff" + struct.pack(">I", b << 16 | a))
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0 if gray else 2, 0, 0, 0))
    idats = b"".join(chunk(b"IDAT", stream[i:i + (1 << 20)]) for i in range(0, len(stream), 1 << 20))
    return SIG + ihdr + idats + chunk(b"IEND", b"")


def scans(jpeg):
    """Byte ranges of each SOS segment with its entropy-coded data."""
    out, i = [], 2
    while i + 4 <= len(jpeg) and jpeg[i] == 0xFF:
        marker = jpeg[i + 1]
        if marker == 0xD9:
            break
        end = i + 2 + (jpeg[i + 2] << 8 | jpeg[i + 3])
        if marker == 0xDA:
            while end + 1 < len(jpeg) and not (jpeg[end] == 0xFF and jpeg[end + 1] != 0
                                               and not 0xD0 <= jpeg[end + 1] <= 0xD7):
                end += 1
            out.append((i, end))
        i = end
    return out


def repeated_scan(jpeg, times):
    start, end = scans(jpeg)[1]
    return jpeg[:end] + jpeg[start:end] * times + jpeg[end:]


def app1_chain(jpeg, count=4096):
    segment = b"\xff\xe1\xff\xff" + b"XMP\0" + bytes(65533 - 4)
    return jpeg[:2] + segment * count + jpeg[2:]


def main():
    out = sys.argv[1]
    progressive, arithmetic, photo = (open(path, "rb").read() for path in sys.argv[2:5])
    open(f"{out}/trailing_zeros_rgb.png", "wb").write(trailing_zeros(False))
    open(f"{out}/trailing_zeros_gray.png", "wb").write(trailing_zeros(True))
    open(f"{out}/repeated_scan_x5000.jpg", "wb").write(repeated_scan(progressive, 5000))
    open(f"{out}/repeated_arith_scan_x5000.jpg", "wb").write(repeated_scan(arithmetic, 5000))
    open(f"{out}/app1_chain_256MiB.jpg", "wb").write(app1_chain(photo))


if __name__ == "__main__":
    main()
