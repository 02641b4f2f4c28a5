#!/usr/bin/env python3
"""An animated GIF to an animated WebP, and to an animated GIF, at 256 px: thumbd against
libvips (`vipsthumbnail 'IN.gif[n=-1]'`, which imgproxy runs; its GIF writer is cgif with
libimagequant or quantizr), wall time (median of rounds, alternating) and peak RSS from GNU
time, what each output keeps: frames, delays, loop count (read back by libvips), and each
GIF's quality: PSNR of every frame (Pillow's reading) against the source frame resized by
Pillow (Lanczos, no palette), averaged.

The GIF is made here with Pillow: 200 frames of 640x480, a moving picture with a changing
palette, delays cycling 40/60/80 ms, looping 3 times. A second, photographic one (30 frames
of 480x360 panning across a corpus photo, 256 colours each, dithered by Pillow) is made to
GIF by both too: its quality is the harder test of a palette.

    python3 bench/animation.py [--thumbd .build/release/thumbd] [--rounds 5] [--frames 200]
        [--photo ../shared/corpus/photo/coil/normal.jpg]
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


def make_pan(path, photo):
    source = Image.open(photo).convert("RGB")
    width, height = source.size
    frames = []
    for i in range(30):
        x = int((width - 480) * i / 29)
        frames.append(source.crop((x, 0, x + 480, min(height, 360))).quantize(256))
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=80, loop=0)


def run(command):
    done = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + command, capture_output=True,
                          text=True, check=True)
    seconds, peak = done.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(peak)


def gif_psnr(source, made):
    """Mean PSNR over frames of `made` (RGB, Pillow's reading) against the frames of `source`
    resized by Pillow to the same size."""
    from PIL import ImageSequence
    import math
    scores = []
    with Image.open(source) as a, Image.open(made) as b:
        for original, frame in zip(ImageSequence.Iterator(a), ImageSequence.Iterator(b)):
            got = frame.convert("RGB")
            want = original.convert("RGB").resize(got.size, Image.LANCZOS)
            pairs = zip(got.tobytes(), want.tobytes())
            error = sum((x - y) ** 2 for x, y in pairs) / (got.width * got.height * 3)
            scores.append(99.0 if error == 0 else 10 * math.log10(255 ** 2 / error))
    return sum(scores) / len(scores)


def header(path, field):
    done = subprocess.run(["vipsheader", "-f", field, path], capture_output=True, text=True)
    return done.stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release", "thumbd"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--photo", default=os.path.join(
        HERE, "..", "..", "shared", "corpus", "photo", "coil", "normal.jpg"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        gif = os.path.join(work, "in.gif")
        delays = make_gif(gif, args.frames)
        ours, theirs = os.path.join(work, "thumbd.webp"), os.path.join(work, "vips.webp")
        still = os.path.join(work, "still.webp")
        our_gif, their_gif = os.path.join(work, "thumbd.gif"), os.path.join(work, "vips.gif")
        commands = {
            "thumbd": [args.thumbd, "thumbnail", "--size", "256x256", "--format", "webp",
                       "--frames", str(args.frames), "--jobs", "1", "-o", ours, gif],
            "vips": ["vipsthumbnail", gif + "[n=-1]", "--size", "256x256", "-o", theirs],
            "thumbd still": [args.thumbd, "thumbnail", "--size", "256x256", "--format", "webp",
                             "--jobs", "1", "-o", still, gif],
            "thumbd gif": [args.thumbd, "thumbnail", "--size", "256x256", "--format", "gif",
                           "--frames", str(args.frames), "--jobs", "1", "-o", our_gif, gif],
            "vips gif": ["vipsthumbnail", gif + "[n=-1]", "--size", "256x256", "-o", their_gif],
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
        outputs = (("thumbd", ours), ("vips", theirs), ("thumbd still", still),
                   ("thumbd gif", our_gif), ("vips gif", their_gif))
        for key, path in outputs:
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
        gif_base = statistics.median(times["vips gif"])
        print(f"\nGIF out: thumbd / vips wall time: "
              f"{statistics.median(times['thumbd gif']) / gif_base:.2f}x; sizes: thumbd "
              f"{os.path.getsize(our_gif)} bytes, vips {os.path.getsize(their_gif)} bytes; "
              f"mean PSNR against Pillow's resize: thumbd {gif_psnr(gif, our_gif):.2f} dB, "
              f"vips {gif_psnr(gif, their_gif):.2f} dB")
        pan = os.path.join(work, "pan.gif")
        make_pan(pan, args.photo)
        pan_ours, pan_theirs = os.path.join(work, "pan-thumbd.gif"), os.path.join(work, "pan-vips.gif")
        pan_commands = {
            "thumbd": [args.thumbd, "thumbnail", "--size", "256x256", "--format", "gif",
                       "--frames", "30", "--jobs", "1", "-o", pan_ours, pan],
            "vips": ["vipsthumbnail", pan + "[n=-1]", "--size", "256x256", "-o", pan_theirs],
        }
        pan_times = {key: [] for key in pan_commands}
        for round_index in range(args.rounds):
            order = list(pan_commands) if round_index % 2 == 0 else list(reversed(pan_commands))
            for key in order:
                pan_times[key].append(run(pan_commands[key])[0])
        print(f"photographic pan (30 frames) to GIF: thumbd / vips wall time: "
              f"{statistics.median(pan_times['thumbd']) / statistics.median(pan_times['vips']):.2f}x; "
              f"sizes: thumbd {os.path.getsize(pan_ours)} bytes, vips {os.path.getsize(pan_theirs)} "
              f"bytes; mean PSNR: thumbd {gif_psnr(pan, pan_ours):.2f} dB, "
              f"vips {gif_psnr(pan, pan_theirs):.2f} dB")
        # Stills: each tool's GIF against its own PNG of the same size, so only the palette
        # and the dithering are measured.
        for name in ("normal.jpg", "large.jpg"):
            photo = os.path.join(os.path.dirname(args.photo), name)
            scores = []
            for tool in ("thumbd", "vips"):
                made = {}
                for extension in ("gif", "png"):
                    out = os.path.join(work, f"still-{tool}.{extension}")
                    command = ([args.thumbd, "thumbnail", "--size", "256x256", "--format",
                                extension, "-o", out, photo] if tool == "thumbd" else
                               ["vipsthumbnail", photo, "--size", "256x256", "-o", out])
                    subprocess.run(command, check=True, capture_output=True)
                    made[extension] = out
                scores.append(f"{tool} {gif_psnr(made['png'], made['gif']):.2f} dB, "
                              f"{os.path.getsize(made['gif'])} bytes")
            print(f"still {name} to GIF, against the same tool's PNG: " + "; ".join(scores))


if __name__ == "__main__":
    main()
