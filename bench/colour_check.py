#!/usr/bin/env python3
"""Colour accuracy of thumbd's thumbnails against an independent reference.

For every `icc` row of the corpus manifest that must decode (and any file given on the
command line), the reference is Pillow's full-resolution decode converted to sRGB by
ImageCms (lcms2, relative colorimetric, no black-point compensation), then an exact area
average to the thumbnail's size. A profile Pillow cannot open or link, or one whose colour
space does not match the pixels, leaves the image as it is (taken as sRGB), as thumbd does.

Prints mean and 99th-percentile CIEDE2000 per file, and the worst of each.

    python3 bench/colour_check.py --thumbd .build/release/thumbd [--size 256] [--bpc]
"""
import argparse
import io
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image, ImageCms, ImageOps

from exact_area import area_average

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "corpus"))


def to_lab(rgb):
    c = rgb / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    m = np.array([[0.4124564, 0.3575761, 0.1804375],
                  [0.2126729, 0.7151522, 0.0721750],
                  [0.0193339, 0.1191920, 0.9503041]])
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]),
                     200 * (f[..., 1] - f[..., 2])], axis=-1)


def ciede2000(lab1, lab2):
    L1, a1, b1 = lab1[..., 0], lab1[..., 1], lab1[..., 2]
    L2, a2, b2 = lab2[..., 0], lab2[..., 1], lab2[..., 2]
    c1, c2 = np.hypot(a1, b1), np.hypot(a2, b2)
    cm = (c1 + c2) / 2
    g = 0.5 * (1 - np.sqrt(cm ** 7 / (cm ** 7 + 25.0 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360
    dL = L2 - L1
    dC = c2p - c1p
    dh = h2p - h1p
    dh = np.where(dh > 180, dh - 360, np.where(dh < -180, dh + 360, dh))
    dh = np.where(c1p * c2p == 0, 0, dh)
    dH = 2 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh / 2))
    Lm = (L1 + L2) / 2
    cmp_ = (c1p + c2p) / 2
    hs = h1p + h2p
    hm = np.where(np.abs(h1p - h2p) > 180, np.where(hs < 360, (hs + 360) / 2, (hs - 360) / 2),
                  hs / 2)
    hm = np.where(c1p * c2p == 0, hs, hm)
    t = (1 - 0.17 * np.cos(np.radians(hm - 30)) + 0.24 * np.cos(np.radians(2 * hm))
         + 0.32 * np.cos(np.radians(3 * hm + 6)) - 0.20 * np.cos(np.radians(4 * hm - 63)))
    dtheta = 30 * np.exp(-(((hm - 275) / 25) ** 2))
    rc = 2 * np.sqrt(cmp_ ** 7 / (cmp_ ** 7 + 25.0 ** 7))
    sl = 1 + 0.015 * (Lm - 50) ** 2 / np.sqrt(20 + (Lm - 50) ** 2)
    sc = 1 + 0.045 * cmp_
    sh = 1 + 0.015 * cmp_ * t
    rt = -np.sin(np.radians(2 * dtheta)) * rc
    return np.sqrt((dL / sl) ** 2 + (dC / sc) ** 2 + (dH / sh) ** 2
                   + rt * (dC / sc) * (dH / sh))


SPACES = {"RGB": "RGB", "RGBA": "RGB", "L": "GRAY", "LA": "GRAY", "CMYK": "CMYK",
          "I;16": "GRAY"}


def reference(path, bpc):
    image = Image.open(path)
    image.load()
    icc = image.info.get("icc_profile")
    image = ImageOps.exif_transpose(image) if path.lower().endswith((".jpg", ".jpeg")) \
        else image
    alpha = None
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        image = image.convert("RGBA" if image.mode != "LA" else "LA")
        alpha = image.getchannel("A")
        image = image.convert("RGB" if image.mode == "RGBA" else "L")
    elif image.mode not in ("RGB", "L", "CMYK"):
        image = image.convert("RGB")
    converted = None
    if icc:
        try:
            profile = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            space = profile.profile.xcolor_space.strip()
            if space == SPACES.get(image.mode, "RGB"):
                flags = ImageCms.Flags.BLACKPOINTCOMPENSATION if bpc else ImageCms.Flags.NONE
                converted = ImageCms.profileToProfile(
                    image, profile, ImageCms.createProfile("sRGB"),
                    renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC, outputMode="RGB",
                    flags=flags)
        except (ImageCms.PyCMSError, OSError, ValueError):
            converted = None
    if converted is None:
        converted = image.convert("RGB")
    if alpha is not None:
        converted = converted.convert("RGBA")
        converted.putalpha(alpha)
    return converted


def thumbnail(thumbd, path, size, out_dir):
    out = os.path.join(out_dir, "t.png")
    subprocess.run([thumbd, "thumbnail", path, "--size", f"{size}x{size}", "--format", "png",
                    "--output", out], check=True, capture_output=True)
    image = Image.open(out)
    image.load()
    mode = "RGBA" if image.mode in ("RGBA", "LA") else "RGB"
    return np.asarray(image.convert(mode), dtype=np.float64)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release",
                                                         "thumbd"))
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--bpc", action="store_true", help="reference with black-point "
                        "compensation")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = args.files
    if not files:
        with open(os.path.join(CORPUS, "MANIFEST-formats.tsv")) as manifest:
            next(manifest)
            for line in manifest:
                cols = line.rstrip("\n").split("\t")
                if cols[3] == "icc" and cols[4] == "decode-ok":
                    files.append(os.path.join(CORPUS, cols[0]))
    worst_mean = worst_p99 = 0.0
    print(f"{'file':60} {'size':>9} {'mean':>6} {'p99':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            ours = thumbnail(args.thumbd, path, args.size, tmp)
            ref = reference(path, args.bpc)
            h, w = ours.shape[:2]
            if ref.size != (w, h):
                ref = area_average(ref, (w, h))
            ref = np.asarray(ref.convert("RGBA" if ref.mode == "RGBA" else "RGB"),
                             dtype=np.float64)
            mask = np.ones((h, w), bool)
            if ours.shape[2] == 4 or ref.shape[2] == 4:
                a = ours[..., 3] if ours.shape[2] == 4 else np.full((h, w), 255.0)
                mask = a >= 128
            de = ciede2000(to_lab(np.clip(np.rint(ref[..., :3]), 0, 255)), to_lab(ours[..., :3]))
            de = de[mask] if mask.any() else de.ravel()
            mean, p99 = float(de.mean()), float(np.percentile(de, 99))
            worst_mean, worst_p99 = max(worst_mean, mean), max(worst_p99, p99)
            name = os.path.relpath(path, CORPUS) if path.startswith(CORPUS) else path
            print(f"{name:60} {w:4}x{h:<4} {mean:6.2f} {p99:6.2f}")
    print(f"worst mean {worst_mean:.2f}, worst p99 {worst_p99:.2f}")
    return 0 if worst_mean <= 2 and worst_p99 <= 5 else 1


if __name__ == "__main__":
    sys.exit(main())
