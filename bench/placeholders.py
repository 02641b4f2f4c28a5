#!/usr/bin/env python3
"""What placeholders cost: thumbd's miss and memory-hit rates with `placeholders` on and off.

Starts the release thumbd on a loopback TCP port (no limits per client, no disk cache), in
interleaved rounds with `--placeholders` true and false, and measures from outside over
keep-alive connections:
- misses: every request a new box (64 px and up) of one of five corpus photos, from two
  threads, so each is a decode, a resample, a summary and a hash (when on), and an encode;
- memory hits: one thumbnail asked again and again from four threads.
Prints requests per second per round and the ratio of the medians (on / off).

    python3 bench/placeholders.py [--seconds 6] [--rounds 3] [--thumbd .build/release/thumbd]
"""
import argparse
import http.client
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "shared", "corpus")
PHOTOS = ["photo/coil/normal.jpg", "photo/coil/large.jpg", "photo/exif-samples/jolla.jpg",
          "photo/squoosh/demo-large-photo.jpg", "photo/imaginary/large.jpg"]


def start(binary, work, on):
    log = open(os.path.join(work, "log-%s" % on), "w+")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    daemon = subprocess.Popen(
        [binary, "serve", "--socket", os.path.join(work, "s-%s.sock" % on), "--cache-dir", "",
         "--listen", "127.0.0.1:%d" % port, "--client-miss-rate", "0", "--allow-scheme", "file",
         "--file-root", os.path.realpath(CORPUS), "--placeholders=%s" % ("true" if on else "false"),
         "--log-level", "warn"],
        stderr=log)
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return daemon, port
        except OSError:
            time.sleep(0.01)
    raise SystemExit("thumbd did not start: " + open(log.name).read())


def rate(port, targets, threads, seconds):
    stop = time.monotonic() + seconds
    counts = [0] * threads
    failures = [0] * threads

    def worker(index):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n = 0
        while time.monotonic() < stop:
            target = targets(index, n)
            n += 1
            connection.request("GET", target)
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                counts[index] += 1
            else:
                failures[index] += 1

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if sum(failures):
        raise SystemExit("%d requests failed" % sum(failures))
    return sum(counts) / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release", "thumbd"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="placeholders-")
    urls = [urllib.parse.quote("file://" + os.path.realpath(os.path.join(CORPUS, p)), safe="")
            for p in PHOTOS]
    results = {True: {"miss": [], "hit": []}, False: {"miss": [], "hit": []}}
    for round_index in range(args.rounds):
        for on in (True, False) if round_index % 2 == 0 else (False, True):
            daemon, port = start(args.thumbd, work, on)
            try:
                misses = rate(port, lambda i, n: "/v1/thumbnail?format=jpeg&w=%d&url=%s" % (
                    64 + 2 * n + i, urls[(n + i) % len(urls)]), 2, args.seconds)
                hit = "/v1/thumbnail?format=jpeg&w=200&url=%s" % urls[0]
                rate(port, lambda i, n: hit, 1, 0.2)
                hits = rate(port, lambda i, n: hit, 4, args.seconds)
            finally:
                daemon.terminate()
                daemon.wait()
            results[on]["miss"].append(misses)
            results[on]["hit"].append(hits)
            print("round %d placeholders %-5s misses %7.1f/s  hits %8.1f/s" % (
                round_index, on, misses, hits))
    for kind in ("miss", "hit"):
        on = statistics.median(results[True][kind])
        off = statistics.median(results[False][kind])
        print("%-4s median on %8.1f/s, off %8.1f/s, on/off %.3f" % (kind, on, off, on / off))


if __name__ == "__main__":
    main()
