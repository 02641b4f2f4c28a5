#!/usr/bin/env python3
"""Thumbnail quality of thumbd, vipsthumbnail and Pillow on the corpus photos.

Each photo (kind `photo` of ../shared/corpus/MANIFEST.tsv) is thumbnailed into a 256x256 box
by each tool on its defaults, as PNG: `thumbd thumbnail`, `vipsthumbnail` (with
`--export-profile srgb` for tagged photos, so they come out in sRGB as thumbd's do) and Pillow's
`Image.thumbnail` (then converted to sRGB with ImageCms when the photo has a profile);
vipsthumbnail gets `--export-profile srgb` only for tagged photos. The
reference is Pillow's full-resolution decode, upright, converted to sRGB by ImageCms
(relative colorimetric) when the photo has a profile, reduced with Lanczos-3
(`Image.LANCZOS`) to each tool's output size. Prints PSNR (RGB) per photo and tool, then the
mean and the worst case of each tool.

    python3 bench/quality_vs_peers.py [--thumbd .build/release/thumbd] [--box 256]
"""
import argparse
import io
import os
import subprocess
import tempfile

import numpy as np
from PIL import Image, ImageCms, ImageOps

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.environ.get("THUMBD_CORPUS", os.path.join(HERE, "..", "..", "shared", "corpus"))
SRGB = ImageCms.createProfile("sRGB")


def to_srgb(image, icc):
    image = image.convert("RGB")
    if not icc:
        return image
    try:
        return ImageCms.profileToProfile(
            image, ImageCms.ImageCmsProfile(io.BytesIO(icc)), SRGB,
            renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC, outputMode="RGB")
    except (ImageCms.PyCMSError, OSError, ValueError):
        return image


def psnr(a, b):
    x = np.asarray(a.convert("RGB"), dtype=float)
    y = np.asarray(b.convert("RGB"), dtype=float)
    mse = np.mean((x - y) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release",
                                                         "thumbd"))
    parser.add_argument("--box", type=int, default=256)
    parser.add_argument("--thumbd-args", default="", help="extra thumbd options, e.g. "
                        "'--filter lanczos3'")
    args = parser.parse_args()
    with open(os.path.join(CORPUS, "MANIFEST.tsv")) as manifest:
        next(manifest)
        photos = [line.split("\t")[0] for line in manifest if line.split("\t")[3] == "photo"]
    box = args.box
    scores = {"thumbd": [], "vips": [], "pillow": []}
    print(f"{'photo':58} {'thumbd':>7} {'vips':>7} {'pillow':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for relative in photos:
            path = os.path.join(CORPUS, relative)
            source = Image.open(path)
            icc = source.info.get("icc_profile")
            # Orientation policy is not what this measures: Pillow also honours an XMP
            # tiff:Orientation (photo/sdwebimage/TestJFIF.jpg has one and no EXIF tag), which
            # thumbd and vips ignore. Each tool is compared with the reference it agrees with.
            fulls = [to_srgb(ImageOps.exif_transpose(source), icc), to_srgb(source, icc)]
            outputs = {}
            out = os.path.join(tmp, "thumbd.png")
            subprocess.run([args.thumbd, "thumbnail", path, "--size", f"{box}x{box}",
                            "--format", "png", *args.thumbd_args.split(), "-o", out], check=True, capture_output=True)
            outputs["thumbd"] = Image.open(out)
            out = os.path.join(tmp, "vips.png")
            # --export-profile on an untagged image changes it (vips' sRGB is not the
            # identity on untagged pixels): only for tagged photos.
            export = ["--export-profile", "srgb"] if icc else []
            subprocess.run(["vipsthumbnail", path, "-s", f"{box}x{box}", *export, "-o", out],
                           check=True, capture_output=True)
            outputs["vips"] = Image.open(out)
            pillow = ImageOps.exif_transpose(Image.open(path))
            pillow.thumbnail((box, box))
            outputs["pillow"] = to_srgb(pillow, icc)
            row = []
            for tool, image in outputs.items():
                value = max(psnr(image, full.resize(image.size, Image.LANCZOS))
                            for full in fulls if full.size[0] / full.size[1] > 0
                            and (full.size[0] >= full.size[1]) == (image.size[0] >= image.size[1]))
                scores[tool].append(value)
                row.append(f"{value:7.2f}")
            print(f"{relative:58} {' '.join(row)}")
    print()
    for tool, values in scores.items():
        print(f"{tool:7} mean {np.mean(values):6.2f} dB, worst {min(values):6.2f} dB "
              f"({photos[int(np.argmin(values))]})")


if __name__ == "__main__":
    main()
