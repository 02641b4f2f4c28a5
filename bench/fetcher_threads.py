#!/usr/bin/env python3
"""Where an origin fetch's CPU goes in the daemon: misses from a real HTTP origin on loopback
(nginx serving one small JPEG under any name), distinct URLs, so every request is a download
and a decode. Prints misses per second and the CPU milliseconds per miss of each thread group
of the daemon (from /proc/PID/task/*/stat), so the fetch thread's cost can be judged against
the event loop's and the decoders'.

Usage: bench/fetcher_threads.py [--thumbd PATH] [--requests N] [--concurrency C] [IMAGE]
Needs nginx (apt-get install nginx-light). Build first: swift build -c release.
"""
import argparse
import collections
import os
import shutil
import socket
import tempfile
import threading
import time
import urllib.parse

from loopback import free_port, start_nginx, start_thumbd, stop

HERE = os.path.dirname(os.path.abspath(__file__))


def get(sock_path, target):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return int(data[9:12] or 0)


def thread_cpu(pid):
    """CPU seconds per thread group (name with trailing digits cut)."""
    ticks = os.sysconf("SC_CLK_TCK")
    groups = collections.Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        name = name.rstrip("0123456789").rstrip("-")
        groups[name] += (int(fields[11]) + int(fields[12])) / ticks
    return groups


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release", "thumbd"))
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("image", nargs="?", default=os.path.join(HERE, "..", "..", "shared", "corpus", "photo", "coil", "normal.jpg"))
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="thumbd-fetch-bench-")
    procs = []
    try:
        shutil.copy(a.image, os.path.join(work, "img.jpg"))
        port = free_port()
        procs.append(start_nginx(work, port, "location / { try_files /img.jpg =404; }"))
        daemon, sock = start_thumbd(a.thumbd, work)
        procs.append(daemon)
        before = thread_cpu(daemon.pid)
        counter = iter(range(a.requests))
        lock = threading.Lock()
        failures = [0]

        def worker():
            while True:
                with lock:
                    n = next(counter, None)
                if n is None:
                    return
                url = urllib.parse.quote(f"http://127.0.0.1:{port}/{n}.jpg", safe="")
                if get(sock, f"/v1/thumbnail?url={url}&w=128&h=128") != 200:
                    with lock:
                        failures[0] += 1

        started = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        after = thread_cpu(daemon.pid)
        print(f"{a.requests} misses at concurrency {a.concurrency}: {a.requests / elapsed:.0f}/s, "
              f"{failures[0]} failed")
        print("| thread | CPU ms per miss |")
        print("|---|---:|")
        for name in sorted(after, key=lambda n: -(after[n] - before.get(n, 0))):
            ms = (after[name] - before.get(name, 0)) * 1000 / a.requests
            if ms >= 0.005:
                print(f"| {name} | {ms:.3f} |")
    finally:
        stop(procs, work)


if __name__ == "__main__":
    main()
