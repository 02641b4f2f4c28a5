#!/usr/bin/python3
"""Misses: thumbd against thumbor, the same nginx origin, the same client, interleaved runs.

Every request names a URL nobody asked for before (`/v/N/photo.jpg`, N counting up, which
nginx maps to the same file), so each one is a miss in both: a fetch from the origin, a
decode, a resize, an encode, and thumbd's cache writes. Closed loop: each of C client threads
keeps one keep-alive connection and sends its next request when the answer is in. Per run:
answers per second, and the p50 and p99 of the latency. Rounds alternate which server goes
first; the figures are medians over rounds.

Peers as shipped: nginx (worker_processes auto, sendfile) as the origin; thumbor from PyPI
(HTTP loader through pycurl, as its log advises, no storage, no result storage, unsafe URLs, JPEG quality 80 like thumbd's
default, one process per core: `--processes 0`); the static release thumbd with its defaults
(a disk cache in a folder of the run, one event loop and one decode per core), allowed to
fetch from loopback, without the per-client miss limit (one client asks for everything here).
Both answer `fit-in` 256x256 JPEGs.

Quality beside speed: one thumbnail per source from each, against the area-average reference
(picture_reference.py), PSNR averaged over the sources; and the mean size of the JPEGs.

    swift build -c release --static-swift-stdlib --product thumbd
    /usr/bin/python3 bench/misses_vs_thumbor.py [--rounds 3] [--seconds 15] [--concurrency 8,32]
        [--kinds photo | FILE...]

The default sources are the corpus's camera and phone photos, 0.4 to 24 MP: their latencies
differ by the size of the photo as much as by any queueing, so the tail is also measured on
one photo (FILE), where p99 against p50 shows waiting alone.

thumbor is installed into .build/bench/thumbor-venv on first use (pip, from PyPI) unless
--thumbor names its executable. Needs nginx (scripts/bootstrap installs it) and python3-pil.
"""
import argparse
import http.client
import io
import itertools
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from picture_reference import corpus_files, flatten, psnr, reference  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
THUMBOR_VERSION = "7.8.0"
BOX = 256


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, path, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", path)
            if connection.getresponse().status < 500:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"nothing answered on port {port}")


def thumbor_executable(given):
    if given:
        return given
    venv = os.path.join(ROOT, ".build", "bench", "thumbor-venv")
    executable = os.path.join(venv, "bin", "thumbor")
    if not os.path.exists(executable):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q",
                        f"thumbor=={THUMBOR_VERSION}", "pycurl"], check=True)
    return executable


class Servers:
    """nginx as the origin, thumbd and thumbor, each in a process group of its own."""

    def __init__(self, work, files, thumbd, thumbor):
        self.work = work
        self.groups = []
        origin = os.path.join(work, "origin")
        os.makedirs(origin)
        # nginx's workers run as an unprivileged user: the origin's folders must be theirs to read.
        os.chmod(work, 0o755)
        os.chmod(origin, 0o755)
        self.names = []
        for index, path in enumerate(files):
            name = f"{index}{os.path.splitext(path)[1].lower()}"
            shutil.copy(path, os.path.join(origin, name))
            os.chmod(os.path.join(origin, name), 0o644)
            self.names.append(name)
        self.origin_port = free_port()
        with open(os.path.join(work, "nginx.conf"), "w") as f:
            f.write(f"""worker_processes auto;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  sendfile on;
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{self.origin_port};
    location ~ ^/v/[0-9]+/(?<name>[^/]+)$ {{ alias {origin}/$name; }}
  }}
}}
""")
        self.start(["nginx", "-c", f"{work}/nginx.conf", "-p", work, "-g", "daemon off;"])
        wait_for(self.origin_port, f"/v/0/{self.names[0]}")

        self.thumbd_port = free_port()
        self.start([thumbd, "serve", "--socket", f"{work}/thumbd.sock",
                    "--listen", f"127.0.0.1:{self.thumbd_port}", "--allow-private",
                    "--cache-dir", f"{work}/thumbd-cache", "--log-level", "warn"],
                   # One client asks for everything here: its per-client miss limit (50/s by
                   # default, for a public listener) would answer 429s, not misses.
                   {"THUMBD_CLIENT_MISS_RATE": "0"})
        wait_for(self.thumbd_port, "/healthz")

        self.thumbor_port = free_port()
        with open(os.path.join(work, "thumbor.conf"), "w") as f:
            f.write("LOADER = 'thumbor.loaders.http_loader'\n"
                    "STORAGE = 'thumbor.storages.no_storage'\n"
                    "RESULT_STORAGE = None\n"
                    "ALLOW_UNSAFE_URL = True\n"
                    "QUALITY = 80\n"
                    "AUTO_WEBP = False\n")
        self.start([thumbor, "--port", str(self.thumbor_port), "--ip", "127.0.0.1",
                    "--conf", f"{work}/thumbor.conf", "--processes", "0"])
        wait_for(self.thumbor_port, "/healthcheck")

    def start(self, command, environment=None):
        log = open(os.path.join(self.work, os.path.basename(command[0]) + ".log"), "ab")
        process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True,
                                   env={**os.environ, **(environment or {})})
        self.groups.append(process)

    def stop(self):
        for process in self.groups:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in self.groups:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)

    def source(self, n):
        return f"127.0.0.1:{self.origin_port}/v/{n}/{self.names[n % len(self.names)]}"

    def target(self, server, n):
        if server == "thumbd":
            url = urllib.parse.quote("http://" + self.source(n), safe="")
            return self.thumbd_port, f"/v1/thumbnail?url={url}&w={BOX}&h={BOX}"
        return self.thumbor_port, f"/unsafe/fit-in/{BOX}x{BOX}/{self.source(n)}"


def run(servers, server, concurrency, seconds, counter):
    """One closed-loop run: (answers per second, p50 ms, p99 ms, failures)."""
    latencies = []
    failures = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client():
        connection = None
        mine = []
        while time.monotonic() < deadline:
            port, target = servers.target(server, next(counter))
            start = time.monotonic()
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                connection.request("GET", target)
                response = connection.getresponse()
                body = response.read()
                ok = response.status == 200 and len(body) > 0
            except (OSError, http.client.HTTPException):
                connection = None
                ok = False
            if ok:
                mine.append(time.monotonic() - start)
            else:
                with lock:
                    failures[0] += 1
        with lock:
            latencies.extend(mine)

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    latencies.sort()
    if not latencies:
        return 0.0, 0.0, 0.0, failures[0]

    def percentile(q):
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000

    return len(latencies) / elapsed, percentile(0.5), percentile(0.99), failures[0]


def quality(servers, files, counter):
    """Mean PSNR against the area-average reference, and mean JPEG bytes, per server."""
    scores = {"thumbd": [], "thumbor": []}
    sizes = {"thumbd": [], "thumbor": []}
    for index, path in enumerate(files):
        for server in scores:
            n = next(counter)
            n += (index - n) % len(files)  # a fresh URL of this source
            port, target = servers.target(server, n)
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            connection.request("GET", target)
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                continue
            picture = Image.open(io.BytesIO(body))
            picture.load()
            scores[server].append(psnr(flatten(picture), reference(path, picture.size)))
            sizes[server].append(len(body))
    return ({server: statistics.mean(values) for server, values in scores.items() if values},
            {server: statistics.mean(values) for server, values in sizes.items() if values})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--concurrency", default="8,32")
    parser.add_argument("--kinds", default="photo",
                        help="corpus kinds (MANIFEST column 4) whose files are the sources")
    parser.add_argument("--thumbd", default=os.path.join(ROOT, ".build", "release", "thumbd"))
    parser.add_argument("--thumbor", help="thumbor's executable (default: a venv of its own)")
    parser.add_argument("files", nargs="*", help="sources instead of the corpus's kinds")
    args = parser.parse_args()
    files = args.files or corpus_files(set(args.kinds.split(",")))
    thumbor = thumbor_executable(args.thumbor)
    levels = [int(value) for value in args.concurrency.split(",")]
    work = tempfile.mkdtemp(prefix="thumbd-misses-")
    servers = Servers(work, files, args.thumbd, thumbor)
    counter = itertools.count()
    try:
        print(f"{len(files)} sources, {args.seconds:g} s per run, {os.cpu_count()} cores, "
              f"thumbor {THUMBOR_VERSION}", flush=True)
        for server in ("thumbd", "thumbor"):
            run(servers, server, levels[0], 2, counter)  # warm-up: imports, pools, page cache
        results = {(level, server): [] for level in levels for server in ("thumbd", "thumbor")}
        for round_number in range(args.rounds):
            order = ("thumbd", "thumbor") if round_number % 2 == 0 else ("thumbor", "thumbd")
            for level in levels:
                for server in order:
                    outcome = run(servers, server, level, args.seconds, counter)
                    results[(level, server)].append(outcome)
                    print(f"round {round_number + 1} c={level} {server}: {outcome[0]:.1f}/s, "
                          f"p50 {outcome[1]:.0f} ms, p99 {outcome[2]:.0f} ms, "
                          f"{outcome[3]} failed", flush=True)
        print()
        print("| concurrency | thumbd /s | thumbor /s | thumbd / thumbor | thumbd p50 ms "
              "| thumbd p99 ms | thumbd p99/p50 | thumbor p50 ms | thumbor p99 ms "
              "| thumbor p99/p50 |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for level in levels:
            ours, theirs = results[(level, "thumbd")], results[(level, "thumbor")]
            ratio = statistics.median(a[0] / b[0] for a, b in zip(ours, theirs) if b[0] > 0)

            def med(rows, field):
                return statistics.median(row[field] for row in rows)

            print(f"| {level} | {med(ours, 0):.1f} | {med(theirs, 0):.1f} | {ratio:.2f} "
                  f"| {med(ours, 1):.0f} | {med(ours, 2):.0f} "
                  f"| {statistics.median(r[2] / r[1] for r in ours if r[1]):.1f} "
                  f"| {med(theirs, 1):.0f} | {med(theirs, 2):.0f} "
                  f"| {statistics.median(r[2] / r[1] for r in theirs if r[1]):.1f} |")
        scores, sizes = quality(servers, files, counter)
        print()
        for server in ("thumbd", "thumbor"):
            print(f"{server}: PSNR {scores.get(server, 0):.2f} dB against the area average, "
                  f"{sizes.get(server, 0) / 1024:.1f} KiB per JPEG")
    finally:
        servers.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
