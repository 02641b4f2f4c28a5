#!/usr/bin/env python3
"""Times `thumbd thumbnail` against vipsthumbnail and ImageMagick on the same files.

Every round runs each tool once over the whole set, in alternating order, single-threaded
(VIPS_CONCURRENCY=1, --jobs 1, OMP_NUM_THREADS=1 for ImageMagick). The machines are shared
and noisy, so the figure that matters is the median over rounds of the per-round ratio
thumbd / peer, not any absolute time. Peak RSS comes from GNU time (-f %M) on one extra run.

Usage: bench/thumbnailers.py [--rounds N] [--box WxH] [--thumbd PATH] SET_DIR...
Build first: swift build -c release. Sets: ../shared/bench/make_corpus.sh.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

QUALITY = 85  # what ../shared/bench/peers.sh gives every peer


def tools(thumbd, box, files, out):
    w, h = box.split("x")
    jpegs = [f for f in files if not f.lower().endswith(".png")]
    pngs = [f for f in files if f.lower().endswith(".png")]
    one_proc = {
        "thumbd": [[thumbd, "thumbnail", *files, "--size", box, "--jobs", "1",
                    "--quality", str(QUALITY), "-o", out + "/thumbd/"]],
        "vipsthumbnail": ([["vipsthumbnail", "-s", box, "-o", out + f"/vips/%s.jpg[Q={QUALITY}]", *jpegs]] if jpegs else [])
        + ([["vipsthumbnail", "-s", box, "-o", out + "/vips/%s.png", *pngs]] if pngs else []),
        "convert": [["convert", f, "-thumbnail", box, "-quality", str(QUALITY),
                     os.path.join(out, "im", os.path.basename(f) + (".png" if f in pngs else ".jpg"))]
                    for f in files],
    }
    return one_proc


def run(commands, env):
    start = time.perf_counter()
    for c in commands:
        subprocess.run(c, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def peak_rss_kib(commands, env):
    peak = 0
    for c in commands:
        r = subprocess.run(["/usr/bin/time", "-f", "%M", *c], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, check=True)
        peak = max(peak, int(r.stderr.strip().splitlines()[-1]))
    return peak


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--box", default="256x256")
    p.add_argument("--thumbd", default=os.path.join(os.path.dirname(__file__), "..", ".build", "release", "thumbd"))
    p.add_argument("sets", nargs="+")
    a = p.parse_args()
    env = dict(os.environ, VIPS_CONCURRENCY="1", OMP_NUM_THREADS="1", MAGICK_THREAD_LIMIT="1")
    print(f"| set | files | thumbd ms/img | vipsthumbnail ms/img | convert ms/img | thumbd/vips | thumbd/convert | RSS thumbd / vips / convert (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for s in a.sets:
        files = sorted(os.path.join(s, f) for f in os.listdir(s))
        out = tempfile.mkdtemp(prefix="thumbd-bench-")
        for d in ("thumbd", "vips", "im"):
            os.makedirs(os.path.join(out, d))
        t = tools(os.path.abspath(a.thumbd), a.box, files, out)
        names = list(t)
        times = {n: [] for n in names}
        for r in range(a.rounds):
            order = names if r % 2 == 0 else list(reversed(names))
            for n in order:
                times[n].append(run(t[n], env))
        ratio_v = statistics.median(x / y for x, y in zip(times["thumbd"], times["vipsthumbnail"]))
        ratio_c = statistics.median(x / y for x, y in zip(times["thumbd"], times["convert"]))
        ms = {n: statistics.median(times[n]) * 1000 / len(files) for n in names}
        rss = {n: peak_rss_kib(t[n], env) / 1024 for n in names}
        print(f"| {os.path.basename(s.rstrip('/'))} | {len(files)} | {ms['thumbd']:.1f} | {ms['vipsthumbnail']:.1f} | "
              f"{ms['convert']:.1f} | {ratio_v:.2f} | {ratio_c:.2f} | "
              f"{rss['thumbd']:.0f} / {rss['vipsthumbnail']:.0f} / {rss['convert']:.0f} |", flush=True)
        shutil.rmtree(out)


if __name__ == "__main__":
    sys.exit(main())
