#!/usr/bin/env python3
"""Does a wrong signature's response time say how much of it was right?

Starts the release thumbd with imgproxy's documented key and salt on a loopback TCP port,
then sends signed paths whose signatures are right in their first K characters and wrong
after (K = 0 .. all but the last), interleaved, over one keep-alive connection, and prints
the median and p90 response time per K. A comparison that stopped at the first wrong byte
would grow with K; thumbd compares every byte and tries every key.

    python3 bench/signature_timing.py [--tries 10000] [--thumbd .build/release/thumbd]
"""
import argparse
import base64
import hashlib
import hmac
import os
import random
import re
import socket
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KEY, SALT = bytes.fromhex("736563726574"), bytes.fromhex("68656c6c6f")


def sign(path):
    digest = hmac.new(KEY, SALT + path.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tries", type=int, default=10000)
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release",
                                                         "thumbd"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="signature-timing-")
    log = open(os.path.join(work, "log"), "w+")
    daemon = subprocess.Popen(
        [args.thumbd, "serve", "--socket", os.path.join(work, "s.sock"), "--cache-dir", "",
         "--listen", "127.0.0.1:0", "--signing-key", KEY.hex(), "--signing-salt", SALT.hex()],
        stderr=log)
    try:
        port = None
        for _ in range(500):
            log.seek(0)
            found = re.search(r"127\.0\.0\.1:(\d+)", log.read())
            if found:
                port = int(found.group(1))
                break
            time.sleep(0.01)
        if port is None:
            raise SystemExit("thumbd did not start: " + open(log.name).read())
        path = "/rs:fit:64:64/plain/http%3A%2F%2F127.0.0.1%3A9%2Fx.jpg"
        right = sign(path)
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        prefixes = [0, 8, 16, 24, 32, len(right) - 1]

        def wrong(k):
            tail = "".join(random.choice([c for c in alphabet if c != right[i]])
                           for i in range(k, len(right)))
            return right[:k] + tail

        connection = socket.create_connection(("127.0.0.1", port))
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream = connection.makefile("rb")

        def ask(signature):
            request = f"GET /{signature}{path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
            start = time.perf_counter_ns()
            connection.sendall(request)
            status = stream.readline()
            length = 0
            while True:
                line = stream.readline()
                if line in (b"\r\n", b""):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            stream.read(length)
            elapsed = time.perf_counter_ns() - start
            assert b" 403 " in status, status
            return elapsed

        for _ in range(500):
            ask(wrong(0))  # warm up
        # Every signature made before any is timed: making them (more random characters for
        # a shorter right prefix) would otherwise leave its cost in the caches of the timed
        # request that follows.
        plan = [(k, wrong(k)) for _ in range(args.tries)
                for k in random.sample(prefixes, len(prefixes))]
        times = {k: [] for k in prefixes}
        for k, signature in plan:
            times[k].append(ask(signature))
        print(f"{args.tries} tries per prefix, one keep-alive connection, 403 every time")
        print("| right leading characters | median us | p90 us |")
        print("|---:|---:|---:|")
        for k in prefixes:
            values = sorted(times[k])
            print(f"| {k} of {len(right)} | {statistics.median(values) / 1000:.1f} | "
                  f"{values[int(len(values) * 0.9)] / 1000:.1f} |")
    finally:
        daemon.terminate()
        daemon.wait()


if __name__ == "__main__":
    main()
