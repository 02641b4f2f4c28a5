#!/usr/bin/env python3
"""The memory soak: thumbd serving misses at concurrency 32 from nginx on loopback, over a mix
of large progressive JPEGs, Adam7 PNGs and baseline photos, for a long time; then idle.

Every request has a new URL (a query string nginx ignores), so each is a download and a decode.
Eight clients ask at priority=visible, the others at priority=prefetch. The daemon's RSS is
sampled every 0.25 s from /proc. Reported: the post-start baseline (RSS before any request),
the peak RSS under load against memory_budget + that baseline (taken after one warm-up request
per source and the idle period), the RSS after the load stops
and the idle period passes, visible and prefetch latencies and failures, and the budget's own
figures from /metrics (peak work, waits, refusals).

Usage: bench/soak.py [--thumbd PATH] [--duration S] [--idle S] [--clients N] [--visible N]
                     [--budget SIZE] [--size PX] [--env NAME=VALUE ...] [--mix FILE ...] [--cold]
                     [-- EXTRA THUMBD FLAGS]
Needs nginx, jpegtran (libjpeg-turbo-progs), Pillow and numpy. Build first:
swift build -c release.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

from loopback import Connection, free_port, metric, start_nginx, start_thumbd, stop

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "shared", "corpus")

# Sources of the mix, from ../shared/corpus/photo: made progressive with jpegtran (lossless),
# copied as they are (baseline), or decoded and written as Adam7 PNGs.
PROGRESSIVE = ["coil/large.jpg", "sdwebimage/TestJFIF.jpg", "exif-samples/jolla.jpg",
               "exif-samples/30-type_error.jpg", "squoosh/demo-large-photo.jpg",
               "glide/issue387_rotated_jpeg.jpg"]
BASELINE = ["commons-imaging/Nikon_D50_-_2007.12.19.n.DSC_3656.JPG",
            "sharp/2569067123_aca715a2ee_o.jpg", "scikit-image/retina.jpg",
            "exif-samples/33-type_error.jpg", "coil/normal.jpg"]
ADAM7 = ["sharp/2569067123_aca715a2ee_o.jpg", "exif-samples/canon_hdr_NO.jpg",
         "zune-image/medium_no_samp_2500x1786.jpg"]


def write_adam7(path, rgb):
    """An 8-bit RGB Adam7 PNG of a numpy array (height, width, 3)."""
    import numpy
    height, width, _ = rgb.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
              (0, 1, 1, 2)]
    raw = bytearray()
    for x0, y0, dx, dy in passes:
        sub = rgb[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        rows = numpy.concatenate([numpy.zeros((sub.shape[0], 1), numpy.uint8),
                                  sub.reshape(sub.shape[0], -1)], axis=1)
        raw += rows.tobytes()

    def chunk(kind, data):
        return (len(data).to_bytes(4, "big") + kind + data
                + zlib.crc32(kind + data).to_bytes(4, "big"))
    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 1])
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                + chunk(b"IDAT", zlib.compress(bytes(raw), 6)) + chunk(b"IEND", b""))


def copy_sources(work, paths):
    """PATHS (files of any format thumbd reads) copied into WORK as they are; the names."""
    names = []
    for i, path in enumerate(paths):
        out = f"mix-{i}-{os.path.basename(path)}"
        with open(path, "rb") as f, open(os.path.join(work, out), "wb") as g:
            g.write(f.read())
        names.append(out)
    return names


def make_sources(work):
    """The mix in WORK; returns the file names."""
    import numpy
    from PIL import Image
    names = []
    for i, name in enumerate(PROGRESSIVE):
        out = f"progressive-{i}.jpg"
        subprocess.run(["jpegtran", "-progressive", "-copy", "none", "-outfile",
                        os.path.join(work, out), os.path.join(CORPUS, "photo", name)], check=True)
        names.append(out)
    for i, name in enumerate(BASELINE):
        out = f"baseline-{i}.jpg"
        with open(os.path.join(CORPUS, "photo", name), "rb") as f, \
                open(os.path.join(work, out), "wb") as g:
            g.write(f.read())
        names.append(out)
    for i, name in enumerate(ADAM7):
        out = f"adam7-{i}.png"
        image = Image.open(os.path.join(CORPUS, "photo", name)).convert("RGB")
        write_adam7(os.path.join(work, out), numpy.asarray(image))
        names.append(out)
    return names


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def print_smaps(pid):
    """The process's resident memory by mapping (file, [heap], [stack], anonymous), to stderr."""
    totals = {}
    name = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:
                name = fields[5] if len(fields) > 5 else f"[anon {fields[0]}]"
            elif fields[0] == "Rss:":
                totals[name] = totals.get(name, 0) + int(fields[1])
    for name, kib in sorted(totals.items(), key=lambda item: -item[1])[:15]:
        print(f"{kib / 1024:8.1f} MiB  {name}", file=sys.stderr)


def percentile(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release", "thumbd"))
    parser.add_argument("--duration", type=float, default=600)
    parser.add_argument("--idle", type=float, default=10)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--visible", type=int, default=8)
    parser.add_argument("--budget", default="256MiB")
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--cold", action="store_true",
                        help="no warm-up: the load starts on a fresh daemon, so the first wave "
                             "runs while the decoders' libraries load (baseline: after start)")
    parser.add_argument("--smaps", action="store_true",
                        help="print the daemon's largest mappings by RSS after the idle period")
    parser.add_argument("--mix", nargs="+", metavar="FILE",
                        help="serve these files instead of the built-in mix (the budget must "
                             "hold for any images: try sets the built-in mix does not cover)")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="thumbd-soak-")
    names = copy_sources(work, args.mix) if args.mix else make_sources(work)
    port = free_port()
    nginx = start_nginx(work, port, "location / { }")
    # The daemon inherits these (start_thumbd passes this process's environment on).
    for item in args.env:
        key, value = item.split("=", 1)
        os.environ[key] = value
    daemon, sock = start_thumbd(args.thumbd, work, "--memory-budget", args.budget, *args.extra)
    # The post-start baseline: after one request of each source (code paths, libcurl and
    # the decoders' first use are fixed costs, not growth), and the idle trim that follows.
    warm = Connection(sock)
    for name in [] if args.cold else names:
        warm.get(f"/v1/thumbnail?url={urllib_quote(f'http://127.0.0.1:{port}/{name}?warm')}"
                 f"&w={args.size}&h={args.size}")
    time.sleep(args.idle)
    baseline = rss_kib(daemon.pid)
    if args.smaps:
        print("-- after start:", file=sys.stderr)
        print_smaps(daemon.pid)

    samples = []
    stop_sampling = threading.Event()

    def sample():
        while not stop_sampling.is_set():
            samples.append((time.time(), rss_kib(daemon.pid)))
            time.sleep(0.25)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    counter = [0]
    lock = threading.Lock()
    results = {"visible": [], "prefetch": []}
    failures = {"visible": {}, "prefetch": {}}
    end = time.time() + args.duration

    def client(index):
        kind = "visible" if index < args.visible else "prefetch"
        conn = Connection(sock)
        while time.time() < end:
            with lock:
                counter[0] += 1
                n = counter[0]
            name = names[n % len(names)]
            url = f"http://127.0.0.1:{port}/{name}?n={n}"
            target = (f"/v1/thumbnail?url={urllib_quote(url)}&w={args.size}&h={args.size}"
                      f"&priority={kind}")
            started = time.time()
            try:
                status, _, _ = conn.get(target)
            except OSError:
                conn = Connection(sock)
                status = -1
            elapsed = time.time() - started
            with lock:
                if status == 200:
                    results[kind].append(elapsed)
                else:
                    failures[kind][status] = failures[kind].get(status, 0) + 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    load_end = time.time()
    conn = Connection(sock)
    _, _, text = conn.get("/metrics")
    cache_bytes = next((float(line.split()[-1]) for line in text.decode().splitlines()
                        if line.startswith('thumbd_memory_budget_used_bytes{part="cache"}')), 0)
    figures = {name: metric(conn, name) for name in [
        "thumbd_memory_budget_bytes", "thumbd_memory_budget_peak_work_bytes",
        "thumbd_memory_budget_waits_total", "thumbd_memory_budget_refusals_total",
        "thumbd_decodes_total"]}
    time.sleep(args.idle)
    after_idle = rss_kib(daemon.pid)
    stop_sampling.set()
    sampler.join()
    hwm = rss_kib(daemon.pid, "VmHWM")
    if args.smaps:
        print("-- after the load and the idle period:", file=sys.stderr)
        print_smaps(daemon.pid)
    stop([daemon, nginx], work)

    budget_kib = figures["thumbd_memory_budget_bytes"] / 1024
    peak = max(rss for _, rss in samples)
    report = {
        "duration_s": args.duration, "clients": args.clients, "visible_clients": args.visible,
        "budget_mib": budget_kib / 1024, "env": args.env, "extra": args.extra,
        "baseline_mib": baseline / 1024, "peak_mib": max(peak, hwm) / 1024,
        "peak_minus_budget_mib": (max(peak, hwm) - budget_kib) / 1024,
        "after_idle_mib": after_idle / 1024,
        "after_idle_vs_baseline": after_idle / baseline - 1,
        "cache_mib": cache_bytes / 2**20,
        "after_idle_less_cache_vs_baseline": (after_idle - cache_bytes / 1024) / baseline - 1,
        "load_rss_mean_mib": statistics.mean(
            rss for t, rss in samples if t < load_end) / 1024,
        "budget_peak_work_mib": figures["thumbd_memory_budget_peak_work_bytes"] / 2**20,
        "budget_waits": figures["thumbd_memory_budget_waits_total"],
        "budget_refusals": figures["thumbd_memory_budget_refusals_total"],
        "decodes": figures["thumbd_decodes_total"],
    }
    for kind in ("visible", "prefetch"):
        times = results[kind]
        report[kind] = {
            "served": len(times), "failures": failures[kind],
            "p50_ms": percentile(times, 50) * 1000, "p95_ms": percentile(times, 95) * 1000,
            "p99_ms": percentile(times, 99) * 1000}
    print(json.dumps(report, indent=2))


def urllib_quote(text):
    import urllib.parse
    return urllib.parse.quote(text, safe="")


if __name__ == "__main__":
    sys.exit(main())
