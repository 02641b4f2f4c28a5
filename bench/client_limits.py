#!/usr/bin/env python3
"""One noisy client against one ordinary one, with and without limits per client.

Starts the release thumbd on a loopback TCP port, twice in interleaved rounds: once with
its defaults for limits per client (client_miss_rate 50, burst 100) and once with
client_miss_rate 0 (no limit), the peer of the same run. A loopback origin serves a
1080x1350 JPEG. From 127.0.0.2 a client sends misses (a new width each time) at
--rate a second over --connections keep-alive connections; from 127.0.0.3 another sends
visible misses at up to 20 a second and times each. The origin is nginx serving the file
(a Python one when nginx is missing), so it is not the bottleneck. Prints, per mode: what the noisy client got
(200/429/other), and the other client's p50, p99 and worst latency and its failures.

    python3 bench/client_limits.py [--rate 500] [--seconds 10] [--rounds 2]
        [--thumbd .build/release/thumbd] [--image ../shared/corpus/photo/coil/normal.jpg]
"""
import argparse
import http.client
import http.server
import os
import re
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))


def start_nginx_origin(image, work):
    """nginx serving the image as a static file: an origin that is never the bottleneck."""
    nginx = "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else "nginx"
    site = os.path.join(work, "site")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "photo.jpg"), "wb") as out:
        out.write(open(image, "rb").read())
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    user = "user root root;" if os.getuid() == 0 else ""
    with open(os.path.join(work, "origin.conf"), "w") as out:
        out.write(f"""{user}
worker_processes 2; pid {work}/origin.pid; error_log {work}/origin-error.log warn;
events {{ worker_connections 1024; }}
http {{ access_log off; client_body_temp_path {work}; proxy_temp_path {work};
  fastcgi_temp_path {work}; uwsgi_temp_path {work}; scgi_temp_path {work};
  server {{ listen 127.0.0.1:{port}; root {site};
    location / {{ add_header Cache-Control "max-age=3600"; }} }} }}
""")
    process = subprocess.Popen([nginx, "-c", os.path.join(work, "origin.conf"), "-p", work,
                                "-g", "daemon off;"])
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the nginx origin did not start")


def start_origin(image):
    body = open(image, "rb").read()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "max-age=3600")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def start_thumbd(binary, work, limited):
    log = open(os.path.join(work, "log-%s" % limited), "w+")
    arguments = [
        binary, "serve", "--socket", os.path.join(work, "s-%s.sock" % limited),
        "--cache-dir", "", "--listen", "127.0.0.1:0", "--allow-network", "127.0.0.0/8",
    ]
    if not limited:
        arguments += ["--client-miss-rate", "0"]
    daemon = subprocess.Popen(arguments, stderr=log)
    for _ in range(500):
        log.seek(0)
        found = re.search(r"127\.0\.0\.1:(\d+)", log.read())
        if found:
            return daemon, int(found.group(1))
        time.sleep(0.01)
    raise SystemExit("thumbd did not start")


def run(port, source, rate, seconds, connections, round_index):
    encoded = urllib.parse.quote(source, safe="")
    stop = time.monotonic() + seconds
    noisy = {"200": 0, "429": 0, "other": 0}
    lock = threading.Lock()
    counter = iter(range(10**9))

    def noisy_client():
        connection = http.client.HTTPConnection(
            "127.0.0.1", port, timeout=30, source_address=("127.0.0.2", 0))
        interval = connections / rate
        next_at = time.monotonic()
        while time.monotonic() < stop:
            with lock:
                width = 40 + next(counter) % 960
            target = "/v1/thumbnail?w=%d&format=jpeg&rev=n%d&url=%s" % (width, round_index, encoded)
            try:
                connection.request("GET", target)
                response = connection.getresponse()
                response.read()
                key = str(response.status) if response.status in (200, 429) else "other"
            except Exception:
                key = "other"
                connection.close()
                connection = http.client.HTTPConnection(
                    "127.0.0.1", port, timeout=30, source_address=("127.0.0.2", 0))
            with lock:
                noisy[key] += 1
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    latencies = []
    failures = []

    def quiet_client():
        connection = http.client.HTTPConnection(
            "127.0.0.1", port, timeout=30, source_address=("127.0.0.3", 0))
        index = 0
        while time.monotonic() < stop:
            index += 1
            target = "/v1/thumbnail?w=%d&h=%d&format=jpeg&rev=q%d&url=%s" % (
                100 + index, 100 + index, round_index, encoded)
            start = time.perf_counter()
            try:
                connection.request("GET", target)
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    failures.append(response.status)
            except Exception as error:
                failures.append(str(error))
                connection = http.client.HTTPConnection(
                    "127.0.0.1", port, timeout=30, source_address=("127.0.0.3", 0))
            latencies.append((time.perf_counter() - start) * 1000)
            time.sleep(0.05)

    threads = [threading.Thread(target=noisy_client) for _ in range(connections)]
    threads.append(threading.Thread(target=quiet_client))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return noisy, latencies, p99, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release", "thumbd"))
    parser.add_argument(
        "--image", default=os.path.join(HERE, "..", "..", "shared", "corpus", "photo", "coil",
                                        "normal.jpg"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="client-limits-")
    if os.path.exists("/usr/sbin/nginx"):
        origin, origin_port = start_nginx_origin(args.image, work)
    else:
        origin = None
        origin_port = start_origin(args.image).server_address[1]
    source = "http://127.0.0.1:%d/photo.jpg" % origin_port
    results = {True: [], False: []}
    for round_index in range(args.rounds):
        for limited in (True, False):
            daemon, port = start_thumbd(args.thumbd, work, limited)
            try:
                results[limited].append(
                    run(port, source, args.rate, args.seconds, args.connections, round_index))
            finally:
                daemon.terminate()
                daemon.wait()
    if origin:
        origin.terminate()
        origin.wait()
    for limited in (True, False):
        print("== %s" % ("limits per client (defaults: 50/s, burst 100)" if limited
                         else "no limit (client_miss_rate 0)"))
        for noisy, latencies, p99, failures in results[limited]:
            sent = sum(noisy.values())
            print("  noisy 127.0.0.2: %d sent (%.0f/s): 200 %d, 429 %d, other %d"
                  % (sent, sent / args.seconds, noisy["200"], noisy["429"], noisy["other"]))
            print("  quiet 127.0.0.3: %d visible misses, p50 %.1f ms, p99 %.1f ms, max %.1f ms,"
                  " failures %d" % (len(latencies), statistics.median(latencies), p99,
                                    latencies[-1], len(failures)))


if __name__ == "__main__":
    main()
