#!/usr/bin/env python3
"""What a 304 revalidation costs against a full miss, measured in the same run: thumbd in front
of nginx serving one JPEG (nginx sends ETag and Last-Modified and answers If-None-Match with
304). Three kinds of request, interleaved in rounds so machine noise hits them alike:

  miss         a new URL each time (a query string nginx ignores): download and decode
  revalidated  one URL whose origin says max-age=0: every request finds its thumbnail stale,
               asks the origin once (If-None-Match), gets 304, serves the cached thumbnail
  memory       one URL with max-age=3600: a memory hit

Requests are sequential on one kept-alive connection to the Unix socket, so each time is one
request's latency. Checks X-Thumbd-Cache on every answer and that the revalidations decoded
nothing (thumbd_decodes_total).

Usage: bench/revalidation.py [--thumbd PATH] [--rounds N] [--requests N] [--size PX] [IMAGE]
Needs nginx (apt-get install nginx-light). Build first: swift build -c release.
"""
import argparse
import os
import shutil
import socket
import statistics
import tempfile
import time
import urllib.parse

from loopback import Connection, free_port, metric, start_nginx, start_thumbd, stop

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release", "thumbd"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=100)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("image", nargs="?", default=os.path.join(
        HERE, "..", "..", "shared", "corpus", "photo", "coil", "normal.jpg"))
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="thumbd-revalidation-bench-")
    procs = []
    try:
        shutil.copy(a.image, os.path.join(work, "img.jpg"))
        port = free_port()
        procs.append(start_nginx(work, port, """
    location /stale/ { add_header Cache-Control "max-age=0"; try_files /img.jpg =404; }
    location /fresh/ { add_header Cache-Control "max-age=3600"; try_files /img.jpg =404; }"""))
        daemon, sock = start_thumbd(a.thumbd, work)
        procs.append(daemon)
        conn = Connection(sock)

        def target(path):
            url = urllib.parse.quote(f"http://127.0.0.1:{port}{path}", safe="")
            return f"/v1/thumbnail?url={url}&w={a.size}&h={a.size}"

        stale, fresh = target("/stale/photo.jpg"), target("/fresh/photo.jpg")
        for warm in (stale, fresh):
            assert conn.get(warm)[0] == 200
        times = {"miss": [], "revalidated": [], "memory": []}
        serial = 0
        decodes_in_revalidations = 0
        for _ in range(a.rounds):
            for kind in ("miss", "revalidated", "memory"):
                before = metric(conn, "thumbd_decodes_total")
                for _ in range(a.requests):
                    serial += 1
                    wanted = {"miss": target(f"/fresh/photo.jpg?n={serial}"),
                              "revalidated": stale, "memory": fresh}[kind]
                    started = time.perf_counter()
                    status, headers, _ = conn.get(wanted)
                    elapsed = time.perf_counter() - started
                    assert status == 200, status
                    assert headers.get("x-thumbd-cache") == kind, (kind, headers)
                    times[kind].append(elapsed * 1000)
                if kind == "revalidated":
                    decodes_in_revalidations += metric(conn, "thumbd_decodes_total") - before
        revalidations = metric(conn, 'thumbd_revalidations_total{result="unchanged"}')
        print(f"{a.rounds} rounds x {a.requests} requests of each kind, {a.size}x{a.size} box of "
              f"{os.path.basename(a.image)}, {os.cpu_count()} cores")
        print("| request | mean ms | p50 ms | p95 ms |")
        print("|---|---:|---:|---:|")
        for kind, values in times.items():
            values.sort()
            print(f"| {kind} | {statistics.mean(values):.3f} | {values[len(values) // 2]:.3f} | "
                  f"{values[int(len(values) * 0.95)]:.3f} |")
        ratio = statistics.mean(times["miss"]) / statistics.mean(times["revalidated"])
        print(f"a 304 revalidation costs 1/{ratio:.1f} of a miss; decodes during revalidations: "
              f"{decodes_in_revalidations:.0f}; unchanged revalidations counted: {revalidations:.0f}")
    finally:
        stop(procs, work)


if __name__ == "__main__":
    main()
