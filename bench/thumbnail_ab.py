"""Two thumbd builds on the same files, one `thumbd thumbnail` process per run, in interleaved
runs (A, B, then B, A, ...) so the machine's noise falls on both alike: the median wall time
of each build on each file, and B / A. For a change to one decoder path, where a whole
benchmark would drown it.

    /usr/bin/python3 bench/thumbnail_ab.py A_BINARY B_BINARY FILE... [--runs 21] [--size 256]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args()
    builds = [args.a, args.b]
    times = {(build, path): [] for build in builds for path in args.files}
    with tempfile.TemporaryDirectory() as work:
        output = os.path.join(work, "out.jpg")

        def run(build, path):
            command = [build, "thumbnail", path, "--size", f"{args.size}x{args.size}",
                       "-o", output]
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            return time.perf_counter() - start

        for path in args.files:  # one warm-up each: the page cache, the binaries
            for build in builds:
                run(build, path)
        for index in range(args.runs):
            for path in args.files:
                for build in builds if index % 2 == 0 else builds[::-1]:
                    times[(build, path)].append(run(build, path))
    print("| file | A ms | B ms | B / A |")
    print("|---|---:|---:|---:|")
    for path in args.files:
        a = statistics.median(times[(args.a, path)]) * 1000
        b = statistics.median(times[(args.b, path)]) * 1000
        print(f"| {os.path.basename(path)} | {a:.1f} | {b:.1f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
