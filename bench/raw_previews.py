#!/usr/bin/env python3
"""Camera RAW thumbnails: `thumbd thumbnail` (the embedded JPEG preview, shrink-on-load) against
`dcraw_emu -h` (LibRaw's half-size demosaic, what a RAW-unaware thumbnailer falls back to), and
against vipsthumbnail where it reads the file; and the picture against the preview ExifTool
extracts (`exiftool -b -PreviewImage`, else `-JpgFromRaw`), decoded by Pillow and area-averaged
to thumbd's size: the two must be the same picture.

Files: the corpus's RAW files that give a thumbnail (MANIFEST-formats2.tsv, raw-*), plus any
given on the command line. Each tool runs once per file per round, alternating which goes
first; the figure is the median over rounds of the summed times.

Usage: bench/raw_previews.py [--rounds N] [--thumbd PATH] [FILE...]
Needs dcraw_emu (libraw-bin), exiftool (libimage-exiftool-perl), Pillow and numpy; build
first: swift build -c release.
"""
import argparse
import io
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from PIL import Image

from exact_area import area_average

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.environ.get("THUMBD_CORPUS", os.path.join(ROOT, "..", "shared", "corpus"))
SINGLE = dict(os.environ, VIPS_CONCURRENCY="1", OMP_NUM_THREADS="1")
TURNS = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
         4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
         6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_90}


def corpus_raws(thumbd):
    files = []
    with open(os.path.join(CORPUS, "MANIFEST-formats2.tsv")) as f:
        next(f)
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[1].startswith("raw-") and p[2] in ("decode-ok", "either"):
                path = os.path.join(CORPUS, p[0])
                ok = subprocess.run([thumbd, "thumbnail", path, "--size", "64x64", "-o",
                                     "/tmp/raw-probe.jpg"], capture_output=True).returncode == 0
                if ok:
                    files.append(path)
    return files


def timed(command):
    start = time.perf_counter()
    code = subprocess.run(command, env=SINGLE, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode
    return time.perf_counter() - start, code


def preview(path):
    """The largest JPEG ExifTool extracts, as thumbd picks the largest for a large box."""
    best, best_tag = None, None
    for tag in ("-PreviewImage", "-JpgFromRaw", "-OtherImage", "-ThumbnailImage"):
        data = subprocess.run(["exiftool", "-b", tag, path], capture_output=True).stdout
        if data[:2] == b"\xff\xd8":
            image = Image.open(io.BytesIO(data))
            if best is None or image.size[0] * image.size[1] > best.size[0] * best.size[1]:
                best, best_tag = image, tag
    return best, best_tag


def psnr(a, b):
    a = np.asarray(a.convert("RGB"), dtype=float)
    b = np.asarray(b.convert("RGB"), dtype=float)
    mse = ((a - b) ** 2).mean()
    return float("inf") if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--thumbd", default=os.path.join(ROOT, ".build", "release", "thumbd"))
    p.add_argument("files", nargs="*")
    args = p.parse_args()
    files = args.files or corpus_raws(args.thumbd)
    print("| file | thumbd ms | dcraw_emu -h ms | ratio | preview (ExifTool) | PSNR vs that preview |")
    print("|---|---:|---:|---:|---|---:|")
    ratios = []
    for f in files:
        ours = [args.thumbd, "thumbnail", f, "--size", "256x256", "--jobs", "1", "-o", "/tmp/raw-ours.png",
                "--format", "png"]
        theirs = ["dcraw_emu", "-h", "-Z", "/tmp/raw-dcraw.ppm", f]
        if os.path.exists("/tmp/raw-dcraw.ppm"):
            os.remove("/tmp/raw-dcraw.ppm")
        t_ours, t_theirs = [], []
        for r in range(args.rounds + 1):
            order = [("o", ours), ("t", theirs)] if r % 2 == 0 else [("t", theirs), ("o", ours)]
            times = {}
            for key, command in order:
                times[key], code = timed(command)
                # dcraw_emu exits 0 on some files it cannot read: it must have written a picture.
                if key == "t" and (code != 0 or not os.path.exists("/tmp/raw-dcraw.ppm")):
                    times[key] = None
                if key == "t" and os.path.exists("/tmp/raw-dcraw.ppm"):
                    os.remove("/tmp/raw-dcraw.ppm")
            if r == 0:
                continue
            t_ours.append(times["o"])
            if times.get("t") is not None:
                t_theirs.append(times["t"])
        mine = Image.open("/tmp/raw-ours.png")
        extracted, tag = preview(f)
        quality = "-"
        if extracted is not None:
            # The raw file's own orientation, as thumbd applies it.
            value = subprocess.run(["exiftool", "-n", "-s3", "-Orientation", f],
                                   capture_output=True, text=True).stdout.split()
            upright = extracted.transpose(TURNS[int(value[0])]) \
                if value and value[0].isdigit() and int(value[0]) in TURNS else extracted
            quality = f"{psnr(mine, area_average(upright.convert('RGBA'), mine.size).convert('RGB')):.1f}"
        ms = 1000 * statistics.median(t_ours)
        other = 1000 * statistics.median(t_theirs) if t_theirs else None
        if other:
            ratios.append(ms / other)
        print(f"| {os.path.relpath(f, CORPUS)} | {ms:.1f} | {other:.1f} | {ms / other:.3f} | {tag} | {quality} |"
              if other else f"| {os.path.relpath(f, CORPUS)} | {ms:.1f} | fails | - | {tag} | {quality} |",
              flush=True)
    if ratios:
        print(f"\nmedian ratio thumbd / dcraw_emu -h: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    sys.exit(main())
