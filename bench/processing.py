#!/usr/bin/env python3
"""imgproxy's processing options in thumbd against libvips, on the corpus's photos.

Three tables and a cost table:
- crops: where thumbd's smart crop (g:sm), libvips' attention crop (`vips thumbnail --crop
  attention`, what imgproxy's g:sm runs) and a centre crop put their windows, against the
  subjects labelled by hand in bench/crop_subjects.tsv. A window holds its subject when it
  covers at least 80% of the smaller of the two. Each window is found by matching the crop
  against the whole picture resized to the cover scale (least absolute difference along the
  free side);
- filters: PSNR of thumbd's bl and sh against `vips gaussblur` and `vips sharpen` at the same
  sigma, applied to thumbd's own plain thumbnail (so only the filter differs);
- geometry: exact pixel equality of rot, fl, pd and ex against `vips rot`, `vips flip` and
  `vips embed` of the plain thumbnail;
- cost: CPU time (user + system) of one `thumbd thumbnail --jobs 1` process over a set of
  12 MP JPEGs at 256x256, per option, over the plain thumbnail's (g:sm over the centre cover
  crop's), median of rounds in alternating order; peak RSS from GNU time.

    python3 bench/processing.py [--thumbd .build/release/thumbd] [--rounds 5] [--copies 20]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from picture_reference import CORPUS, psnr  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TWELVE_MP = os.path.join(CORPUS, "photo/sdwebimage/TestJFIF.jpg")
FILTER_PHOTOS = ["photo/sharp/2569067123_aca715a2ee_o.jpg", "photo/coil/normal.jpg",
                 "photo/scikit-image/astronaut.png", "photo/image-png/kodim07.png"]


def thumbd(binary, source, out, size, options=None, fit=None):
    command = [binary, "thumbnail", "--size", size]
    if fit:
        command += ["--fit", fit]
    if options:
        command += ["--options", options]  # after --size: the later flag wins
    command += ["-o", out, source]
    subprocess.run(command, check=True, capture_output=True)


def rgb(path):
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.int32)


def subjects():
    rows = []
    with open(os.path.join(HERE, "crop_subjects.tsv")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, left, top, right, bottom, what = line.rstrip("\n").split("\t")
            rows.append((name, tuple(map(float, (left, top, right, bottom))), what))
    return rows


def window(crop, whole):
    """Where `crop` sits in `whole` (same scale), by least absolute difference: (x, y)."""
    grey = lambda a: a.mean(axis=2)
    c, w = grey(crop), grey(whole)
    best, where = None, (0, 0)
    for y in range(0, w.shape[0] - c.shape[0] + 1):
        for x in range(0, w.shape[1] - c.shape[1] + 1):
            score = np.abs(w[y:y + c.shape[0], x:x + c.shape[1]] - c).mean()
            if best is None or score < best:
                best, where = score, (x, y)
    return where


def holds(box, win):
    """Whether the window covers 80% of the smaller of it and the subject box."""
    x0, y0, x1, y1 = max(box[0], win[0]), max(box[1], win[1]), min(box[2], win[2]), min(box[3], win[3])
    inter = max(0, x1 - x0) * max(0, y1 - y0)
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])
    return inter >= 0.8 * min(area(box), area(win))


def iou(a, b):
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0, x1 - x0) * max(0, y1 - y0)
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])
    return inter / (area(a) + area(b) - inter)


def crops(binary, work):
    print("\n### Crops: subject held (of the labelled boxes), and overlap with libvips\n")
    print("| photo | box | subject | thumbd g:sm | vips attention | centre | IoU sm/attention |")
    print("|---|---|---|---|---|---|---|")
    totals = {"sm": 0, "attention": 0, "centre": 0, "n": 0}
    overlaps = []
    for name, box, what in subjects():
        source = os.path.join(CORPUS, name)
        plain = os.path.join(work, "whole.png")
        thumbd(binary, source, plain, "400x400")
        w, h = Image.open(plain).size
        for bw, bh in ((120, 120), (80, 120) if w >= h else (120, 80)):
            # The whole picture at the cover scale, as both crops see it.
            scale = max(bw / w, bh / h)
            cw, ch = max(bw, round(w * scale)), max(bh, round(h * scale))
            whole = os.path.join(work, "cover.png")
            thumbd(binary, source, whole, f"{cw}x{ch}", fit="fill")
            full = rgb(whole)
            wins = {}
            ours = os.path.join(work, "sm.png")
            thumbd(binary, source, ours, f"{bw}x{bh}", options="g:sm", fit="cover")
            wins["sm"] = window(rgb(ours), full)
            theirs = os.path.join(work, "attention.png")
            subprocess.run(["vips", "thumbnail", source, theirs, str(bw), "--height", str(bh),
                            "--crop", "attention"], check=True)
            wins["attention"] = window(rgb(theirs), full)
            wins["centre"] = ((cw - bw) // 2, (ch - bh) // 2)
            label = (box[0] * cw, box[1] * ch, box[2] * cw, box[3] * ch)
            held = {}
            for key, (x, y) in wins.items():
                held[key] = holds(label, (x, y, x + bw, y + bh))
                totals[key] += held[key]
            totals["n"] += 1
            (sx, sy), (ax, ay) = wins["sm"], wins["attention"]
            overlap = iou((sx, sy, sx + bw, sy + bh), (ax, ay, ax + bw, ay + bh))
            overlaps.append(overlap)
            mark = lambda b: "yes" if b else "no"
            print(f"| {os.path.basename(name)} | {bw}x{bh} | {what} | {mark(held['sm'])} | "
                  f"{mark(held['attention'])} | {mark(held['centre'])} | {overlap:.2f} |")
    n = totals["n"]
    print(f"| **all** | | | **{totals['sm']}/{n}** | **{totals['attention']}/{n}** | "
          f"**{totals['centre']}/{n}** | median {statistics.median(overlaps):.2f} |")


def filters(binary, work):
    print("\n### Filters: PSNR against libvips at the same sigma (dB)\n")
    print("| photo | bl:1 | bl:3 | bl:10 | sh:1 | sh:3 | sh:10 |")
    print("|---|---|---|---|---|---|---|")
    for name in FILTER_PHOTOS:
        source = os.path.join(CORPUS, name)
        plain = os.path.join(work, "plain.png")
        thumbd(binary, source, plain, "256x256")
        cells = []
        for option, command in (("bl", "gaussblur"), ("sh", "sharpen")):
            for sigma in (1, 3, 10):
                ours = os.path.join(work, "ours.png")
                thumbd(binary, source, ours, "256x256", options=f"{option}:{sigma}")
                theirs = os.path.join(work, "theirs.v")
                args = [plain, theirs] + ([str(sigma)] if command == "gaussblur"
                                          else ["--sigma", str(sigma)])
                subprocess.run(["vips", command] + args, check=True)
                cast = os.path.join(work, "theirs.png")
                subprocess.run(["vips", "cast", theirs, cast, "uchar"], check=True)
                cells.append(f"{psnr(Image.open(ours).convert('RGB'), Image.open(cast).convert('RGB')):.1f}")
        print(f"| {os.path.basename(name)} | " + " | ".join(cells) + " |")


def geometry(binary, work):
    print("\n### Geometry: pixels equal to libvips' (lossless operations)\n")
    cases = [
        ("rot:90", ["rot", "d90"]), ("rot:180", ["rot", "d180"]), ("rot:270", ["rot", "d270"]),
        ("fl:1", ["flip", "horizontal"]), ("fl:0:1", ["flip", "vertical"]),
        ("pd:5:6:7:8/bg:10:20:30", None), ("rs:fit:300:300:0:1:soea/bg:200:100:0", None),
    ]
    print("| option | libvips | photos equal |")
    print("|---|---|---|")
    for option, operation in cases:
        equal = 0
        for name in FILTER_PHOTOS:
            source = os.path.join(CORPUS, name)
            plain = os.path.join(work, "plain.png")
            thumbd(binary, source, plain, "256x256", options="bg:10:20:30")
            ours = os.path.join(work, "ours.png")
            thumbd(binary, source, ours, "256x256", options=option + "/bg:10:20:30"
                   if "bg" not in option else option)
            theirs = os.path.join(work, "theirs.png")
            if operation:
                subprocess.run(["vips", operation[0], plain, theirs, operation[1]], check=True)
                described = "vips " + " ".join(operation)
            elif option.startswith("pd"):
                w, h = Image.open(plain).size
                subprocess.run(["vips", "embed", plain, theirs, "8", "5", str(w + 14), str(h + 12),
                                "--extend", "background", "--background", "10 20 30"], check=True)
                described = "vips embed, background"
            else:
                thumbd(binary, source, plain, "300x300", options="bg:200:100:0")
                w, h = Image.open(plain).size
                subprocess.run(["vips", "gravity", plain, theirs, "south-east", "300", "300",
                                "--extend", "background", "--background", "200 100 0"],
                               check=True)
                described = "vips gravity south-east, background"
            equal += np.array_equal(rgb(ours), rgb(theirs))
        print(f"| `{option}` | {described} | {equal}/{len(FILTER_PHOTOS)} |")


def cost(binary, work, rounds, copies, only_variants=None):
    print(f"\n### Cost: {copies} copies of a 12 MP JPEG to 256x256, one process, --jobs 1\n")
    folder = os.path.join(work, "set")
    os.makedirs(folder, exist_ok=True)
    for i in range(copies):
        shutil.copy(TWELVE_MP, os.path.join(folder, f"{i:03d}.jpg"))
    variants = [("plain", None), ("cover", "rt:fill"), ("g:sm", "rt:fill/g:sm"),
                ("bl:10", "bl:10"), ("sh:10", "sh:10"),
                ("pix:8", "pix:8"), ("rot:90/fl:1", "rot:90/fl:1"), ("pd:10/bg:ffffff", "pd:10/bg:ffffff")]
    if only_variants:
        variants = [v for v in variants if v[0] in only_variants]
    times = {key: [] for key, _ in variants}
    peaks = {key: [] for key, _ in variants}
    for round_index in range(rounds):
        order = variants if round_index % 2 == 0 else list(reversed(variants))
        for key, options in order:
            out = os.path.join(work, "out")
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            fit = []
            command = ["/usr/bin/time", "-f", "%U %S %M", binary, "thumbnail", "--jobs", "1",
                       "--size", "256x256", "-o", out + "/"] + fit
            if options:
                command += ["--options", options]
            done = subprocess.run(command + [folder], capture_output=True, text=True, check=True)
            user, system, peak = done.stderr.strip().splitlines()[-1].split()
            times[key].append(float(user) + float(system))
            peaks[key].append(int(peak))
    print("| option | CPU s | over its base | peak RSS MiB | over its base |")
    print("|---|---|---|---|---|")
    for key, _ in variants:
        # A crop's gravity is measured against the same cover crop at the centre.
        base_key = "cover" if key == "g:sm" else "plain"
        base, base_peak = statistics.median(times[base_key]), statistics.median(peaks[base_key])
        t, p = statistics.median(times[key]), statistics.median(peaks[key])
        print(f"| `{key}` (over {base_key}) | {t:.2f} | {t / base:.3f}x | {p / 1024:.1f} | "
              f"{(p - base_peak) / 1024:+.1f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release", "thumbd"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--only", choices=["crops", "filters", "geometry", "cost"])
    parser.add_argument("--variants", help="comma-separated cost variants (default: all)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="thumbd-processing-")
    try:
        if args.only in (None, "crops"):
            crops(args.thumbd, work)
        if args.only in (None, "filters"):
            filters(args.thumbd, work)
        if args.only in (None, "geometry"):
            geometry(args.thumbd, work)
        if args.only in (None, "cost"):
            cost(args.thumbd, work, args.rounds, args.copies,
                 args.variants.split(",") if args.variants else None)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
