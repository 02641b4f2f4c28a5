#!/usr/bin/env python3
"""An animated GIF to an animated WebP at 256 px: thumbd against libvips (`vipsthumbnail
'IN.gif[n=-1]'`, which imgproxy runs), wall time (median of rounds, alternating) and peak RSS
from GNU time, and what each output keeps: frames, delays, loop count (read back by libvips).

The GIF is made here with Pillow: 200 frames of 640x480, a moving picture with a changing
palette, delays cycling 40/60/80 ms, looping 3 times.

    python3 bench/animation.py [--thumbd .build/release/thumbd] [--rounds 5] [--frames 200]
"""
import argparse
import os
import statistics
import subprocess
import tempfile

from PIL import Image, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))


def make_gif(path, frames):
    pictures, delays = [], []
    for i in range(frames):
        image = Image.new("RGB", (640, 480), (20 + i % 200, 40, 90))
        draw = ImageDraw.Draw(image)
        x = (i * 7) % 560
        draw.ellipse([x, 120 + (i * 3) % 200, x + 80, 200 + (i * 3) % 200], fill=(240, 200, 30))
        draw.rectangle([0, 400, 640, 480], fill=((i * 5) % 255, 160, 70))
        pictures.append(image.convert("P", palette=Image.ADAPTIVE, colors=64))
        delays.append((40, 60, 80)[i % 3])
    pictures[0].save(path, save_all=True, append_images=pictures[1:], duration=delays, loop=3)
    return delays


def run(command):
    done = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + command, capture_output=True,
                          text=True, check=True)
    seconds, peak = done.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(peak)


def header(path, field):
    done = subprocess.run(["vipsheader", "-f", field, path], capture_output=True, text=True)
    return done.stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release", "thumbd"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--frames", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        gif = os.path.join(work, "in.gif")
        delays = make_gif(gif, args.frames)
        ours, theirs = os.path.join(work, "thumbd.webp"), os.path.join(work, "vips.webp")
        still = os.path.join(work, "still.webp")
        commands = {
            "thumbd": [args.thumbd, "thumbnail", "--size", "256x256", "--format", "webp",
                       "--frames", str(args.frames), "--jobs", "1", "-o", ours, gif],
            "vips": ["vipsthumbnail", gif + "[n=-1]", "--size", "256x256", "-o", theirs],
            "thumbd still": [args.thumbd, "thumbnail", "--size", "256x256", "--format", "webp",
                             "--jobs", "1", "-o", still, gif],
        }
        times = {key: [] for key in commands}
        peaks = {key: [] for key in commands}
        for round_index in range(args.rounds):
            order = list(commands) if round_index % 2 == 0 else list(reversed(commands))
            for key in order:
                seconds, peak = run(commands[key])
                times[key].append(seconds)
                peaks[key].append(peak)
        print(f"{args.frames} frames of 640x480 to 256 px, {args.rounds} rounds\n")
        print("| | wall s (median) | peak RSS MiB | frames | delays kept | loop |")
        print("|---|---|---|---|---|---|")
        for key, path in (("thumbd", ours), ("vips", theirs), ("thumbd still", still)):
            pages = header(path, "n-pages") or "1"
            kept = header(path, "delay").split() == [str(d) for d in delays]
            loop = header(path, "loop")
            print(f"| {key} | {statistics.median(times[key]):.3f} | "
                  f"{statistics.median(peaks[key]) / 1024:.1f} | {pages} | "
                  f"{'yes' if kept else 'no'} | {loop} |")
        base = statistics.median(times["vips"])
        print(f"\nthumbd / vips wall time: {statistics.median(times['thumbd']) / base:.2f}x; "
              f"peak RSS over the still: "
              f"{(statistics.median(peaks['thumbd']) - statistics.median(peaks['thumbd still'])) / 1024:+.1f} MiB")
        print(f"sizes: thumbd {os.path.getsize(ours)} bytes, vips {os.path.getsize(theirs)} bytes")


if __name__ == "__main__":
    main()
