#!/usr/bin/env python3
"""ThumbHashes decoded by an independent implementation, against the thumbnails they stand for.

Reads DIR/*.hash (standard Base64) beside DIR/*.png (the thumbnail the hash was made from),
decodes each hash with the `thumbhash` package from PyPI (not thumbd's code), scales the
decoded picture up to 32x32 (bilinear) and compares it with a 32x32 area average of the
thumbnail, both over mid grey: PSNR over RGB. The same is done for the hash the package's
own encoder makes of the thumbnail (scaled to fit 100x100, as its specification asks), so
the figures say both how close thumbd's hashes come to the picture and how they compare with
the reference encoder's. Prints JSON: count, min and median of each, the same for photographs
alone (files whose KIND is not png-valid), the least margin (thumbd's PSNR less the
reference's), and the worst files.

    python3 Tests/Placeholder/thumbhash-psnr.py DIR
"""
import base64
import contextlib
import glob
import io
import json
import math
import os
import statistics
import sys

import thumbhash
from PIL import Image


def over_grey(image):
    grey = Image.new("RGBA", image.size, (128, 128, 128, 255))
    return Image.alpha_composite(grey, image.convert("RGBA")).convert("RGB")


def psnr(a, b):
    error = sum((x - y) ** 2 for x, y in zip(a.tobytes(), b.tobytes())) / (32 * 32 * 3)
    return 99.0 if error == 0 else 10 * math.log10(255 * 255 / error)


def decode(hash_bytes):
    # The package prints as it decodes: keep its chatter out of the report.
    with contextlib.redirect_stdout(io.StringIO()):
        width, height, rgba = thumbhash.thumb_hash_to_rgba(hash_bytes)
    decoded = Image.frombytes("RGBA", (width, height), bytes(rgba))
    return over_grey(decoded).resize((32, 32), Image.BILINEAR)


def reference_hash(thumbnail):
    """The package's own encoder's hash, or None for a picture with transparency (its
    encoder fails on those: it mistypes the alpha channel's result)."""
    image = thumbnail.convert("RGBA")
    if image.getextrema()[3][0] < 255:
        return None
    scale = min(1.0, 100 / max(image.size))
    size = (max(1, round(image.size[0] * scale)), max(1, round(image.size[1] * scale)))
    image = image.resize(size, Image.BOX)
    with contextlib.redirect_stdout(io.StringIO()):
        return thumbhash.rgba_to_thumb_hash(size[0], size[1], list(image.tobytes()))


def main():
    directory = sys.argv[1]
    results = []
    for path in sorted(glob.glob(os.path.join(directory, "*.hash"))):
        name = path[:-5]
        hash_bytes = list(base64.b64decode(open(path).read().strip()))
        thumbnail = Image.open(name + ".png")
        thumbnail.load()
        reference = over_grey(thumbnail).resize((32, 32), Image.BOX)
        ours = psnr(decode(hash_bytes), reference)
        theirs_hash = reference_hash(thumbnail)
        theirs = psnr(decode(theirs_hash), reference) if theirs_hash else None
        results.append((ours, theirs, os.path.basename(name), len(hash_bytes)))
    ours = [r[0] for r in results]
    theirs = [r[1] for r in results if r[1] is not None]
    margins = [r[0] - r[1] for r in results if r[1] is not None]
    # Files named INDEX-KIND: photographs (the corpus's photo, JPEG and HEIF/WebP sets) apart
    # from the synthetic PNG test patterns, which no blur resembles.
    photos = [r[0] for r in results if not r[2].endswith("png-valid")]
    print(json.dumps({
        "count": len(results),
        "min": round(min(ours), 2) if ours else None,
        "median": round(statistics.median(ours), 2) if ours else None,
        "reference_min": round(min(theirs), 2) if theirs else None,
        "reference_median": round(statistics.median(theirs), 2) if theirs else None,
        "least_margin": round(min(margins), 2) if margins else None,
        "median_margin": round(statistics.median(margins), 2) if margins else None,
        "photo_count": len(photos),
        "photo_min": round(min(photos), 2) if photos else None,
        "photo_median": round(statistics.median(photos), 2) if photos else None,
        "max_hash_bytes": max((r[3] for r in results), default=0),
        "worst": [[round(o, 2), t and round(t, 2), n] for o, t, n, _ in sorted(results)[:5]],
    }))


if __name__ == "__main__":
    main()
