#!/usr/bin/env python3
"""What the colour transform adds to thumbnail time.

Each JPEG of the set gets a copy tagged with an embedded profile (an APP2 ICC_PROFILE segment
inserted after SOI, the image data untouched) and a copy with every APP2 segment removed.
Each round thumbnails both sets with one `thumbd thumbnail --jobs 1` process each, in
alternating order; the figure is the median over rounds of tagged / untagged, in wall time
and in CPU time (user + system of the child, which the machine's other load disturbs less).

    python3 bench/colour_cost.py [--rounds 9] [--box 256x256] [--profile FILE.icc|JPEG]
        [--thumbd .build/release/thumbd] SET_DIR
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "corpus"))


def segments(jpeg):
    """(marker, bytes) for each segment before the first scan, and the rest."""
    out, i = [], 2
    while i + 4 <= len(jpeg) and jpeg[i] == 0xFF and jpeg[i + 1] != 0xDA:
        length = jpeg[i + 2] << 8 | jpeg[i + 3]
        out.append((jpeg[i + 1], jpeg[i:i + 2 + length]))
        i += 2 + length
    return out, jpeg[i:]


def icc_of(path):
    data = open(path, "rb").read()
    if not data.startswith(b"\xff\xd8"):
        return data  # a bare .icc file
    parts, _ = segments(data)
    chunks = [s[4 + 14:] for m, s in parts if m == 0xE2 and s[4:16] == b"ICC_PROFILE\0"]
    return b"".join(chunks)


def app2(profile):
    if len(profile) > 65519:
        sys.exit("profile too large for one APP2 segment")
    body = b"ICC_PROFILE\0" + bytes([1, 1]) + profile
    return b"\xff\xe2" + (len(body) + 2).to_bytes(2, "big") + body


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--box", default="256x256")
    parser.add_argument("--profile",
                        default=os.path.join(CORPUS, "icc/danbooru/countergirl-p3.jpg"))
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release",
                                                         "thumbd"))
    parser.add_argument("set")
    args = parser.parse_args()
    profile = icc_of(args.profile)
    with tempfile.TemporaryDirectory() as tmp:
        sets = {"tagged": [], "untagged": []}
        for name in sorted(os.listdir(args.set)):
            if not name.lower().endswith((".jpg", ".jpeg")):
                continue
            data = open(os.path.join(args.set, name), "rb").read()
            parts, rest = segments(data)
            plain = b"\xff\xd8" + b"".join(s for m, s in parts if m != 0xE2) + rest
            for kind, bytes_ in (("untagged", plain), ("tagged", plain[:2] + app2(profile)
                                                        + plain[2:])):
                path = os.path.join(tmp, kind + "-" + name)
                open(path, "wb").write(bytes_)
                sets[kind].append(path)
        os.makedirs(os.path.join(tmp, "out"))
        times = {"tagged": [], "untagged": []}
        cpu = {"tagged": [], "untagged": []}
        for round_ in range(args.rounds + 1):
            order = ["tagged", "untagged"] if round_ % 2 else ["untagged", "tagged"]
            for kind in order:
                start = time.perf_counter()
                used = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run([args.thumbd, "thumbnail", *sets[kind], "--size", args.box,
                                "--jobs", "1", "-o", os.path.join(tmp, "out") + "/"],
                               check=True, capture_output=True)
                now = resource.getrusage(resource.RUSAGE_CHILDREN)
                if round_:  # the first round warms the page cache
                    times[kind].append(time.perf_counter() - start)
                    cpu[kind].append(now.ru_utime + now.ru_stime - used.ru_utime
                                     - used.ru_stime)
        count = len(sets["tagged"])
        print(f"{count} files, {args.rounds} rounds, box {args.box}, profile "
              f"{len(profile)} bytes")
        for kind in ("untagged", "tagged"):
            print(f"  {kind:9} {1000 * statistics.median(times[kind]) / count:7.1f} ms/image, "
                  f"CPU {1000 * statistics.median(cpu[kind]) / count:7.1f} ms/image")
        for name, figures in (("wall", times), ("CPU", cpu)):
            ratios = [t / u for t, u in zip(figures["tagged"], figures["untagged"]) if u > 0]
            print(f"  tagged / untagged, {name}: median {statistics.median(ratios):.3f} "
                  f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
