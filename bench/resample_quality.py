#!/usr/bin/env python3
"""Thumbnail quality of one or more thumbd builds on the corpus photos.

Each photo of ../shared/corpus (kind `photo`, and with --formats the WebP/GIF/HEIF images of
0.25 MP or more) is thumbnailed to 256x256 PNG by each build, and compared (PSNR over RGB,
transparent pixels over white) with two references made from a full-resolution decode by the
first build: an exact area average (bench/exact_area.py) and Lanczos-3 (Pillow's LANCZOS). Prints the
mean and the worst case per build and reference.

Usage: bench/resample_quality.py [--formats] THUMBD [THUMBD...]
Needs Pillow and numpy.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

from exact_area import area_average

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.environ.get("THUMBD_CORPUS", os.path.join(ROOT, "..", "shared", "corpus"))


def photos(formats):
    out = []
    with open(os.path.join(CORPUS, "MANIFEST.tsv")) as f:
        next(f)
        out += [line.split("\t")[0] for line in f if line.split("\t")[3] == "photo"]
    if formats:
        with open(os.path.join(CORPUS, "MANIFEST-formats.tsv")) as f:
            next(f)
            for line in f:
                p = line.split("\t")
                w, _, h = p[5].partition("x")
                big = w.isdigit() and h.isdigit() and int(w) * int(h) >= 250_000
                if p[4] == "decode-ok" and p[3] in ("webp-valid", "gif-valid", "heif-valid") and big:
                    out.append(p[0])
    return out


def flat(image):
    image = image.convert("RGBA")
    white = Image.new("RGBA", image.size, (255, 255, 255, 255))
    return np.asarray(Image.alpha_composite(white, image).convert("RGB"), dtype=float)


def psnr(a, b):
    mse = ((a - b) ** 2).mean()
    return 99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--formats", action="store_true")
    p.add_argument("thumbd", nargs="+")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="thumbd-quality-")
    scores = {(t, r): [] for t in a.thumbd for r in ("area", "lanczos3")}
    for path in photos(a.formats):
        source = os.path.join(CORPUS, path)
        full = os.path.join(work, "full.png")
        subprocess.run([a.thumbd[0], "thumbnail", source, "--size", "16384x16384", "--format",
                        "png", "-o", full], check=True, stdout=subprocess.DEVNULL)
        reference = Image.open(full)
        reference.load()
        for t in a.thumbd:
            out = os.path.join(work, "thumb.png")
            subprocess.run([t, "thumbnail", source, "--size", "256x256", "--format", "png",
                            "-o", out], check=True, stdout=subprocess.DEVNULL)
            thumb = Image.open(out)
            mine = flat(thumb)
            for name in ("area", "lanczos3"):
                ref = flat(area_average(reference, thumb.size) if name == "area" else
                           reference.resize(thumb.size, Image.LANCZOS, reducing_gap=None))
                scores[(t, name)].append((psnr(mine, ref), path))
    print("| build | reference | files | mean PSNR | worst PSNR (file) |")
    print("|---|---|---:|---:|---|")
    for (t, name), values in scores.items():
        worst = min(values)
        mean = sum(v for v, _ in values) / len(values)
        print(f"| {t} | {name} | {len(values)} | {mean:.2f} | {worst[0]:.2f} ({worst[1]}) |")


if __name__ == "__main__":
    sys.exit(main())
