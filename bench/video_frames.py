#!/usr/bin/env python3
"""Video thumbnails: thumbd (its worker, thumbd-frame, in the bubblewrap sandbox, sandbox
included) against ffmpegthumbnailer, the program tumbler and GNOME run for videos.

Speed, interleaved: each round runs both tools on every file, alternating which goes first.
- one process per file for both (`thumbd thumbnail FILE` sets up its sandbox each time;
  `ffmpegthumbnailer -i FILE`), the summed time per round;
- thumbd's batch form too (`thumbd thumbnail FILE... --jobs 1`: one process, one set-up), as
  `thumbd desktop` and the daemon run.
The figure is the median over rounds.

Pictures: each tool's thumbnail against `ffmpeg -ss T -frames:v 1` at T = 10% of the
duration (the time both aim at), area-scaled by ffmpeg to the thumbnail's size: PSNR in dB.

Memory, peak RSS from outside with GNU time: the worker alone on each file at 256 px (its
process is all FFmpeg runs in), and the daemon's own high-water mark (VmHWM) after serving
every file over HTTP, against one that served nothing.

Files: the corpus's decode-ok videos (MANIFEST-formats2.tsv), a 4K H.264 and a 4K HEVC clip
made with ffmpeg, plus any given on the command line.

Usage: bench/video_frames.py [--rounds N] [--build PATH] [FILE...]
Build first: . scripts/flags && thumbd_build_installed. Needs ffmpeg, ffmpegthumbnailer, time,
Pillow and numpy.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.environ.get("THUMBD_CORPUS", os.path.join(ROOT, "..", "shared", "corpus"))


def corpus_videos():
    files = []
    with open(os.path.join(CORPUS, "MANIFEST-formats2.tsv")) as f:
        next(f)
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[1].startswith("video") and p[2] == "decode-ok":
                files.append(os.path.join(CORPUS, p[0]))
    return files


def generated(folder):
    os.makedirs(folder, exist_ok=True)
    made = []
    for name, codec in [("uhd-h264.mp4", ["-c:v", "libx264", "-preset", "veryfast"]),
                        ("uhd-hevc.mp4", ["-c:v", "libx265", "-preset", "ultrafast",
                                          "-x265-params", "log-level=error"])]:
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i",
                            "testsrc2=size=3840x2160:rate=30", "-t", "10", *codec, "-g", "60",
                            "-pix_fmt", "yuv420p", "-y", path], check=True)
        made.append(path)
    return made


def timed(command):
    start = time.perf_counter()
    code = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.perf_counter() - start, code


def duration(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of",
                          "csv=p=0", path], capture_output=True, text=True).stdout.strip()
    try:
        return float(out)
    except ValueError:
        return None


def psnr(image_path, video, seconds):
    ours = np.asarray(Image.open(image_path).convert("RGB"), dtype=np.float64)
    h, w = ours.shape[:2]
    raw = subprocess.run(["ffmpeg", "-v", "error", "-ss", "%.3f" % seconds, "-i", video,
                          "-frames:v", "1", "-vf", "scale=%d:%d:flags=area" % (w, h), "-f",
                          "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True).stdout
    if len(raw) != w * h * 3:
        return None
    reference = np.frombuffer(raw, dtype=np.uint8).reshape(h, w, 3).astype(np.float64)
    mse = np.mean((ours - reference) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def peak_rss(command, stdin=None):
    result = subprocess.run(["/usr/bin/time", "-f", "RSS %M"] + command, stdin=stdin,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = [l for l in result.stderr.splitlines() if l.startswith("RSS ")]
    return int(lines[-1].split()[1]) if lines else None


def daemon_hwm(thumbd, files):
    """The daemon's VmHWM in KiB after serving `files` at 256 px over HTTP (0 files: idle)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tempfile.mkdtemp()
    roots = sorted({os.path.dirname(os.path.realpath(f)) for f in files} | {folder})
    # No disk cache: a cache left by an earlier run would answer without decoding.
    command = [thumbd, "serve", "--socket", folder + "/s", "--listen", "127.0.0.1:%d" % port,
               "--cache-dir", ""]
    for root in roots:
        command += ["--file-root", root]
    daemon = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        for path in files:
            url = "http://127.0.0.1:%d/v1/thumbnail?url=file://%s&w=256&h=256" % (
                port, os.path.realpath(path))
            status = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url],
                                    capture_output=True, text=True).stdout
            if status != "200":
                print("daemon answered %s for %s" % (status, os.path.basename(path)))
        with open("/proc/%d/status" % daemon.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    finally:
        daemon.terminate()
        daemon.wait()
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--build", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    thumbd = os.path.join(args.build, "thumbd")
    worker = os.path.join(args.build, "thumbd-frame")
    work = tempfile.mkdtemp()
    files = corpus_videos() + generated(os.path.join(tempfile.gettempdir(), "thumbd-video-bench")) + args.files

    per_file = {"thumbd": [], "ffmpegthumbnailer": []}
    batch = []
    failures = {"thumbd": set(), "ffmpegthumbnailer": set()}
    for round_index in range(args.rounds):
        sums = {"thumbd": 0.0, "ffmpegthumbnailer": 0.0}
        for index, path in enumerate(files):
            runs = [("thumbd", [thumbd, "thumbnail", path, "--size", "256x256", "-o",
                                os.path.join(work, "t%d.png" % index)]),
                    ("ffmpegthumbnailer", ["ffmpegthumbnailer", "-i", path, "-o",
                                           os.path.join(work, "f%d.png" % index), "-s", "256"])]
            if (round_index + index) % 2:
                runs.reverse()
            for name, command in runs:
                seconds, code = timed(command)
                sums[name] += seconds
                if code != 0:
                    failures[name].add(path)
        for name in sums:
            per_file[name].append(sums[name])
        seconds, _ = timed([thumbd, "thumbnail", *files, "--size", "256x256", "--jobs", "1",
                            "-o", os.path.join(work, "batch") + "/"])
        batch.append(seconds)

    thumbd_time = statistics.median(per_file["thumbd"])
    peer_time = statistics.median(per_file["ffmpegthumbnailer"])
    print("files: %d (%d corpus, 2 made at 3840x2160, %d given)"
          % (len(files), len(files) - 2 - len(args.files), len(args.files)))
    print("one process per file: thumbd %.2f s, ffmpegthumbnailer %.2f s: ratio %.2f"
          % (thumbd_time, peer_time, thumbd_time / peer_time))
    print("thumbd batch (one process, --jobs 1): %.2f s: ratio %.2f"
          % (statistics.median(batch), statistics.median(batch) / peer_time))
    for name in failures:
        if failures[name]:
            print("%s failed on: %s" % (name, ", ".join(sorted(os.path.basename(f) for f in failures[name]))))

    # thumbd's frame against ffmpeg's at the time the worker reports (the frame is the same
    # one: this is the decode, colour and scaling); how far that time is from 10% in; and
    # both tools against ffmpeg's frame at 10% in (neither decodes up to it exactly).
    ours, at_ten, theirs, distances = [], [], [], []
    for index, path in enumerate(files):
        length = duration(path)
        image = os.path.join(work, "t%d.png" % index)
        with open(path, "rb") as stdin:
            head = subprocess.run([worker, os.path.basename(path), "256", "256", "100000000"],
                                  stdin=stdin, capture_output=True).stdout[:36]
        if len(head) < 36 or not os.path.exists(image):
            continue
        frame_ms, duration_ms = int.from_bytes(head[16:20], "little"), int.from_bytes(head[20:24], "little")
        value = psnr(image, path, frame_ms / 1000)
        if value is not None and value != float("inf"):
            ours.append(value)
        if duration_ms != 0xFFFFFFFF and not int.from_bytes(head[24:28], "little") & 1:
            distances.append(abs(frame_ms - duration_ms / 10) / 1000)
        if length and length >= 3:
            for name, collected in [("t", at_ten), ("f", theirs)]:
                picture = os.path.join(work, "%s%d.png" % (name, index))
                value = psnr(picture, path, length / 10) if os.path.exists(picture) else None
                if value is not None and value != float("inf"):
                    collected.append(value)
    print("thumbd against ffmpeg -ss at its frame's time: median %.1f dB, lowest %.1f dB (%d files)"
          % (statistics.median(ours), min(ours), len(ours)))
    print("frame time from 10%% in (frames not passed over as dark): median %.2f s, largest %.2f s (%d files)"
          % (statistics.median(distances), max(distances), len(distances)))
    print("against ffmpeg -ss at 10%% in, files of 3 s or more: thumbd median %.1f dB (%d), "
          "ffmpegthumbnailer median %.1f dB (%d)"
          % (statistics.median(at_ten), len(at_ten), statistics.median(theirs), len(theirs)))

    rss = []
    for path in files:
        with open(path, "rb") as stdin:
            value = peak_rss([worker, os.path.basename(path), "256", "256", "100000000"], stdin)
        rss.append((value or 0, os.path.basename(path)))
    rss.sort()
    print("worker peak RSS at 256 px: median %.1f MiB, largest %.1f MiB (%s)"
          % (statistics.median(r[0] for r in rss) / 1024, rss[-1][0] / 1024, rss[-1][1]))
    for value, name in rss:
        if name.startswith("uhd-") or "4k" in name:
            print("  %s: %.1f MiB" % (name, value / 1024))
    idle = daemon_hwm(thumbd, [])
    served = daemon_hwm(thumbd, files)
    print("daemon VmHWM: idle %.1f MiB, after every file %.1f MiB (+%.1f MiB)"
          % (idle / 1024, served / 1024, (served - idle) / 1024))


if __name__ == "__main__":
    sys.exit(main())
