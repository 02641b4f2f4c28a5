#!/usr/bin/env python3
"""What a fresh daemon keeps from the first run of each decoder and encoder.

thumbd opens some libraries on first use (libheif, libavcodec for HEVC, libjxl), and every
library's code becomes resident as it runs. This starts `thumbd serve` with no disk cache,
asks for one small thumbnail of each kind in turn (64 px, JPEG out), then the same JPEG as
WebP, AVIF and PNG, and prints the daemon's RSS after each, once the idle trim has run: the
growth each first run brings. The codecs count these as `first_use` (CImageCodecs/internal.h,
`ic_first_use`), so that a budget counting the process's own memory expects the growth.

Usage: bench/first_use.py [--thumbd PATH] [--order KIND,KIND...]
Kinds: jpeg png webp heic avif tiff gif jxl (sources from ../shared/corpus; the PNG and WebP
are made from the JPEG by ImageMagick's `convert`). Build first: swift build -c release.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

from loopback import Connection, start_thumbd, stop

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "shared", "corpus")
SOURCES = {
    "jpeg": "photo/coil/normal.jpg",
    "heic": "heif-valid/kimageformats/rgba.heic",
    "avif": "heif-valid/pillow/rot1mir1.avif",
    "tiff": "tiff-valid/kimageformats/testcard_cmyk16.tif",
    "gif": "gif-valid/giflib/x-trans.gif",
    "jxl": "jxl-valid/exiv2/Reagan.jxl",
}


def resident_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release", "thumbd"))
    parser.add_argument("--order", default="jpeg,png,webp,heic,avif,tiff,gif,jxl")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="thumbd-first-use-")
    files = os.path.join(work, "files")
    os.mkdir(files)
    names = {}
    for kind, relative in SOURCES.items():
        names[kind] = f"{kind}{os.path.splitext(relative)[1]}"
        shutil.copy(os.path.join(CORPUS, relative), os.path.join(files, names[kind]))
    for kind, extension in (("png", ".png"), ("webp", ".webp")):
        names[kind] = kind + extension
        subprocess.run(["convert", os.path.join(files, names["jpeg"]), "-resize", "400x400",
                        os.path.join(files, names[kind])], check=True)

    daemon, sock = start_thumbd(args.thumbd, work, "--file-root", files)
    time.sleep(3)
    before = resident_mib(daemon.pid)
    print(f"{'after start':<22} {before:6.1f} MiB")
    conn = Connection(sock)

    def ask(label, name, output, width):
        nonlocal before
        url = urllib.parse.quote("file://" + os.path.join(files, name), safe="")
        status, _, _ = conn.get(f"/v1/thumbnail?url={url}&w={width}&h=64&format={output}")
        time.sleep(3)  # past the idle trim (2 s)
        now = resident_mib(daemon.pid)
        print(f"{label:<22} {now:6.1f} MiB  {now - before:+5.1f}  ({status})")
        before = now

    for kind in args.order.split(","):
        ask(f"first {kind}", names[kind], "jpeg", 64)
    for output in ("webp", "avif", "png"):
        # Another width: a new thumbnail, not the memory cache's.
        ask(f"first {output} output", names["jpeg"], output, 65)
    stop([daemon], work)


if __name__ == "__main__":
    sys.exit(main())
