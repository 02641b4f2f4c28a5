#!/usr/bin/env python3
"""WebP, GIF, HEIC, AVIF, TIFF and BMP sources: `thumbd thumbnail` against vipsthumbnail, and
the encoders.

Decoding (`decode`): each set is thumbnailed to 256x256 JPEG (quality 85) by both tools in
one process per tool and round, alternating which goes first: one image at a time
(VIPS_CONCURRENCY=1, --jobs 1; both still let libwebp run its filter thread), and with
--threads default also each tool on its defaults (thumbd one job per core, vips its own
threads). The figure is the median over rounds of the per-round ratio thumbd / vips.
Beside it, quality: PSNR of each tool's output (decoded) against an exact area average of a
full-resolution decode of the source (thumbd's decoders at full size, bench/exact_area.py;
for TIFF and BMP, Pillow's decode, and for JPEG XL, djxl's: independent ones).

Sets (built under --work from files on this machine, nothing downloaded):
  webp-12mp   the 12 MP JPEGs of ../shared/bench/make_corpus.sh, written as lossy WebP q80
  webp-corpus the corpus's larger WebP files (the 24 MP bryce.webp among them)
  gif         the corpus's GIFs of 64x64 or more (their first frames)
  heic        the corpus's HEIC photos (HEVC; 12 MP grid, 2 MP, ...)
  heic-no-thumbnail  those without an embedded thumbnail
  avif        the corpus's AVIF photos of 0.25 MP or more
  tiff-corpus the corpus's TIFFs of 0.25 MP or more that Pillow reads (MANIFEST-formats2.tsv)
  tiff-12mp-* the 12 MP JPEGs written by libvips as TIFF: lzw (strips, horizontal predictor),
              deflate-tiled (256x256 tiles), jpeg (YCbCr in JPEG, strips), none (uncompressed)
  bmp-12mp    the 12 MP JPEGs written by Pillow as 24-bit BMP (vips reads them through
              ImageMagick)
  jxl-corpus  the corpus's JPEG XL files of 0.25 MP or more (MANIFEST-formats2.tsv)
  jxl-12mp    the 12 MP JPEGs encoded by cjxl (lossy, distance 1, effort 7: VarDCT)

Encoding (`encode`): the 12 MP JPEG set thumbnailed to 256x256 as JPEG, WebP and AVIF at
quality 80 (AVIF at each speed from 4 to 9): ms per image (the whole thumbnail: decode,
resample, encode; the encoders are the difference), output bytes, PSNR against the same
thumbnail as PNG.

Embedded thumbnails (`thumbs`): the corpus's HEICs that carry one, at a box it covers with
the 1.75x headroom (128x128), with and without it (--full-decode): ms per image, PSNR against
an exact area average of the full image.

Usage: bench/formats.py [--rounds N] [--threads single|default|both] [--thumbd PATH]
                        [--work DIR] [--sets NAME,...] [decode] [encode] [thumbs]
Needs vipsthumbnail (libvips-tools), Pillow and numpy; build first: swift build -c release.
"""
import argparse
import glob
import os
import shutil
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


def manifest():
    rows = []
    with open(os.path.join(CORPUS, "MANIFEST-formats.tsv")) as f:
        next(f)
        for line in f:
            p = line.rstrip("\n").split("\t")
            w, _, h = p[5].partition("x")
            pixels = int(w) * int(h) if w.isdigit() and h.isdigit() else 0
            rows.append((p[0], p[3], p[4], pixels, p[6]))
    return rows


def manifest2():
    """MANIFEST-formats2.tsv rows: path, kind, expect, pixels."""
    rows = []
    with open(os.path.join(CORPUS, "MANIFEST-formats2.tsv")) as f:
        next(f)
        for line in f:
            p = line.rstrip("\n").split("\t")
            pixels = int(p[3]) * int(p[4]) if p[3].isdigit() and p[4].isdigit() else 0
            rows.append((p[0], p[1], p[2], pixels))
    return rows


def pillow_reads(path):
    try:
        with Image.open(path) as image:
            image.load()
        return True
    except Exception:
        return False


def build_sets(thumbd, work):
    sets = {}
    sets["tiff-corpus"] = [os.path.join(CORPUS, r[0]) for r in manifest2()
                           if r[1] == "tiff-valid" and r[2] == "decode-ok" and r[3] >= 250_000
                           and pillow_reads(os.path.join(CORPUS, r[0]))]
    sets["jxl-corpus"] = [os.path.join(CORPUS, r[0]) for r in manifest2()
                          if r[1] == "jxl-valid" and r[2] == "decode-ok" and r[3] >= 250_000]
    rows = manifest()
    ok = [r for r in rows if r[2] == "decode-ok"]
    sets["webp-corpus"] = [os.path.join(CORPUS, r[0]) for r in ok
                           if r[1] == "webp-valid" and r[3] >= 250_000]
    sets["gif"] = [os.path.join(CORPUS, r[0]) for r in ok if r[1] == "gif-valid" and r[3] >= 4096]
    sets["heic"] = [os.path.join(CORPUS, r[0]) for r in ok
                    if r[1] == "heif-valid" and r[0].endswith(".heic") and r[3] >= 250_000]
    # vipsthumbnail uses an embedded thumbnail as soon as it covers the box (thumbd only with
    # the 1.75x headroom): the same decoding work on both sides needs files without one.
    sets["heic-no-thumbnail"] = [os.path.join(CORPUS, r[0]) for r in ok
                                 if r[1] == "heif-valid" and r[0].endswith(".heic")
                                 and r[3] >= 250_000 and "thumbnail" not in r[4]]
    sets["avif"] = [os.path.join(CORPUS, r[0]) for r in ok
                    if r[1] == "heif-valid" and r[0].endswith(".avif") and r[3] >= 250_000
                    and r[3] <= 30_000_000 and "grid" not in r[0]]
    jpegs = sorted(glob.glob("/tmp/benchcorpus/jpeg-12mp/*.jpg"))[:8]
    if jpegs:
        out = os.path.join(work, "webp-12mp")
        os.makedirs(out, exist_ok=True)
        made = []
        for j in jpegs:
            target = os.path.join(out, os.path.splitext(os.path.basename(j))[0] + ".webp")
            if not os.path.exists(target):
                subprocess.run([thumbd, "thumbnail", j, "--size", "16384x16384", "--format", "webp",
                                "--quality", "80", "-o", target], check=True)
            made.append(target)
        sets["webp-12mp"] = made
        for name, options in [("lzw", "[compression=lzw,predictor=horizontal]"),
                              ("deflate-tiled", "[compression=deflate,tile]"),
                              ("jpeg", "[compression=jpeg,Q=90]"), ("none", "")]:
            out = os.path.join(work, "tiff-12mp-" + name)
            os.makedirs(out, exist_ok=True)
            made = []
            for j in jpegs:
                target = os.path.join(out, os.path.splitext(os.path.basename(j))[0] + ".tif")
                if not os.path.exists(target):
                    subprocess.run(["vips", "copy", j, target + options], check=True)
                made.append(target)
            sets["tiff-12mp-" + name] = made
        out = os.path.join(work, "bmp-12mp")
        os.makedirs(out, exist_ok=True)
        made = []
        for j in jpegs:
            target = os.path.join(out, os.path.splitext(os.path.basename(j))[0] + ".bmp")
            if not os.path.exists(target):
                Image.open(j).convert("RGB").save(target)
            made.append(target)
        sets["bmp-12mp"] = made
        out = os.path.join(work, "jxl-12mp")
        os.makedirs(out, exist_ok=True)
        made = []
        for j in jpegs:
            target = os.path.join(out, os.path.splitext(os.path.basename(j))[0] + ".jxl")
            if not os.path.exists(target):
                png = os.path.join(out, "source.png")
                Image.open(j).convert("RGB").save(png)
                subprocess.run(["cjxl", png, target, "-d", "1", "-e", "7", "--quiet"], check=True,
                               stderr=subprocess.DEVNULL)
            made.append(target)
        sets["jxl-12mp"] = made
    return {k: v for k, v in sets.items() if v}


def timed(command, env):
    start = time.perf_counter()
    subprocess.run(command, check=False, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def to_srgb(image):
    """An image with an embedded ICC profile converted to sRGB (Pillow's lcms2), as a
    colour-managed viewer shows it; others as they are."""
    profile = image.info.get("icc_profile")
    if not profile:
        return image
    from PIL import ImageCms
    import io as _io
    try:
        mode = "RGBA" if image.mode in ("RGBA", "LA") else "RGB"
        return ImageCms.profileToProfile(image.convert(mode), ImageCms.ImageCmsProfile(_io.BytesIO(profile)),
                                         ImageCms.createProfile("sRGB"), outputMode=mode)
    except Exception:
        return image


def psnr(a, b):
    a = np.asarray(a.convert("RGB"), dtype=float)
    b = np.asarray(b.convert("RGB"), dtype=float)
    if a.shape != b.shape:
        return None
    mse = ((a - b) ** 2).mean()
    return float("inf") if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def reference(thumbd, source, size, work):
    """Exact area average of a full-resolution decode, at `size`: Pillow's for TIFF and BMP
    (an independent decoder, orientation applied), thumbd's own for the other formats."""
    if source.lower().endswith((".tif", ".tiff", ".bmp")):
        from PIL import ImageOps
        decoded = to_srgb(ImageOps.exif_transpose(Image.open(source))).convert("RGBA")
    elif source.lower().endswith(".jxl"):
        full = os.path.join(work, "djxl.png")
        subprocess.run(["djxl", source, full, "--quiet"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        decoded = Image.open(full)
    else:
        full = os.path.join(work, "full.png")
        subprocess.run([thumbd, "thumbnail", source, "--size", "16384x16384", "--format", "png",
                        "-o", full], check=True, stdout=subprocess.DEVNULL)
        decoded = to_srgb(Image.open(full))
    averaged = area_average(decoded, size)
    background = Image.new("RGBA", averaged.size, (255, 255, 255, 255))
    return Image.alpha_composite(background, averaged).convert("RGB")


def decode_bench(thumbd, sets, rounds, work, threads):
    print("| set | threads | files | thumbd ms/image | vips ms/image | ratio (median) | thumbd PSNR | vips PSNR |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, files in sets.items():
        for mode in (["single", "default"] if threads == "both" else [threads]):
            bench_set(thumbd, name, files, rounds, work, mode)


def bench_set(thumbd, name, files, rounds, work, mode):
    out = os.path.join(work, "out-" + name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out + "/thumbd")
    os.makedirs(out + "/vips")
    jobs = ["--jobs", "1"] if mode == "single" else []
    env = SINGLE if mode == "single" else dict(os.environ)
    ours = [thumbd, "thumbnail", *files, "--size", "256x256", *jobs, "--format", "jpeg",
            "--quality", "85", "-o", out + "/thumbd/"]
    vips = ["vipsthumbnail", "-s", "256x256", "-o", out + "/vips/%s.jpg[Q=85]", *files]
    ratios, t_ours, t_vips = [], [], []
    for r in range(rounds + 1):
        order = [("t", ours), ("v", vips)] if r % 2 == 0 else [("v", vips), ("t", ours)]
        times = {}
        for key, command in order:
            times[key] = timed(command, env)
        if r == 0:
            continue  # warm-up
        ratios.append(times["t"] / times["v"])
        t_ours.append(times["t"])
        t_vips.append(times["v"])
    scores = {"thumbd": [], "vips": []}
    for f in files:
        base = os.path.splitext(os.path.basename(f))[0]
        ours_file = os.path.join(out, "thumbd", base + ".jpg")
        vips_file = os.path.join(out, "vips", base + ".jpg")
        if not (os.path.exists(ours_file) and os.path.exists(vips_file)):
            continue
        mine = Image.open(ours_file)
        try:
            ref = reference(thumbd, f, mine.size, work)
        except subprocess.CalledProcessError:
            continue  # the reference decoder cannot write it (djxl and a float image)
        scores["thumbd"].append(psnr(mine, ref))
        try:
            theirs = to_srgb(Image.open(vips_file))
            theirs.load()
        except Exception:
            continue  # vips wrote no image Pillow reads (a 16-bit HDR source)
        scores["vips"].append(psnr(theirs, ref) if theirs.size == mine.size
                              else psnr(theirs, reference(thumbd, f, theirs.size, work)))

    def mean(values):
        values = [v for v in values if v is not None and v != float("inf")]
        return f"{statistics.mean(values):.1f}" if values else "-"
    n = len(files)
    print(f"| {name} | {mode} | {n} | {1000 * statistics.median(t_ours) / n:.1f} | "
          f"{1000 * statistics.median(t_vips) / n:.1f} | {statistics.median(ratios):.2f} | "
          f"{mean(scores['thumbd'])} | {mean(scores['vips'])} |", flush=True)


def encode_bench(thumbd, rounds, work):
    jpegs = sorted(glob.glob("/tmp/benchcorpus/jpeg-12mp/*.jpg"))[:8]
    if not jpegs:
        print("encode: no /tmp/benchcorpus/jpeg-12mp (run ../shared/bench/make_corpus.sh)")
        return
    variants = [("png", [])] + [("jpeg", []), ("webp", [])] + [
        (f"avif speed {s}", ["--avif-speed", str(s)]) for s in range(4, 10)]
    print("| output | ms/image (median) | bytes/image | PSNR vs PNG thumbnail |")
    print("|---|---:|---:|---:|")
    pngs = {}
    for label, extra in variants:
        fmt = label.split()[0]
        out = os.path.join(work, "enc-" + label.replace(" ", "-"))
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        command = [thumbd, "thumbnail", *jpegs, "--size", "256x256", "--jobs", "1", "--format", fmt,
                   "--quality", "80", *extra, "-o", out + "/"]
        times = [timed(command, SINGLE) for _ in range(rounds + 1)][1:]
        files = sorted(glob.glob(out + "/*"))
        size = statistics.mean(os.path.getsize(f) for f in files)
        scores = []
        for f in files:
            base = os.path.splitext(os.path.basename(f))[0]
            if fmt == "png":
                pngs[base] = f
                continue
            decoded = os.path.join(work, "decoded.png")
            subprocess.run([thumbd, "thumbnail", f, "--size", "16384x16384", "--format", "png",
                            "-o", decoded], check=True, stdout=subprocess.DEVNULL)
            scores.append(psnr(Image.open(decoded), Image.open(pngs[base])))
        quality = f"{statistics.mean(scores):.1f}" if scores else "(reference)"
        print(f"| {label} | {1000 * statistics.median(times) / len(jpegs):.1f} | {size:.0f} | {quality} |",
              flush=True)


def thumbs_bench(thumbd, rounds, work):
    files = [os.path.join(CORPUS, p) for p in (
        "heif-valid/metadata-extractor/IMG_1034.heic", "heif-valid/libheif/example.heic")]
    print("| file | box | with its thumbnail ms | full decode ms | ratio | PSNR with | PSNR full |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for f in files:
        results = {}
        for label, extra in [("thumb", []), ("full", ["--full-decode"])]:
            out = os.path.join(work, f"thumbs-{label}.png")
            command = [thumbd, "thumbnail", f, "--size", "128x128", "--format", "png", *extra,
                       "-o", out]
            times = [timed(command, SINGLE) for _ in range(rounds + 1)][1:]
            image = Image.open(out)
            results[label] = (statistics.median(times), psnr(image, reference(thumbd, f, image.size, work)))
        print(f"| {os.path.basename(f)} | 128x128 | {1000 * results['thumb'][0]:.1f} | "
              f"{1000 * results['full'][0]:.1f} | {results['thumb'][0] / results['full'][0]:.2f} | "
              f"{results['thumb'][1]:.1f} | {results['full'][1]:.1f} |", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--thumbd", default=os.path.join(ROOT, ".build", "release", "thumbd"))
    p.add_argument("--work", default="/tmp/thumbd-formats-bench")
    p.add_argument("--threads", choices=["single", "default", "both"], default="both")
    p.add_argument("--sets", help="decode only these sets (comma-separated names)")
    p.add_argument("what", nargs="*", default=["decode", "encode", "thumbs"])
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if "decode" in args.what:
        sets = build_sets(args.thumbd, args.work)
        if args.sets:
            wanted = args.sets.split(",")
            unknown = [name for name in wanted if name not in sets]
            if unknown:
                p.error(f"no set {', '.join(unknown)}; there are: {', '.join(sets)}")
            sets = {name: sets[name] for name in wanted}
        decode_bench(args.thumbd, sets, args.rounds, args.work, args.threads)
    if "encode" in args.what:
        encode_bench(args.thumbd, args.rounds, args.work)
    if "thumbs" in args.what:
        thumbs_bench(args.thumbd, args.rounds, args.work)


if __name__ == "__main__":
    sys.exit(main())
