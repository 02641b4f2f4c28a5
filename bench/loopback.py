"""What the Python benchmarks share: a free loopback port, nginx as an origin on it, a thumbd on
a Unix socket (each started in a work directory and stopped by the caller), and a kept-alive
HTTP/1.1 connection to that socket with a reader of /metrics."""
import os
import shutil
import socket
import subprocess
import time


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_nginx(work, port, locations):
    """nginx on 127.0.0.1:PORT with root WORK and the given location blocks; the process."""
    with open(os.path.join(work, "nginx.conf"), "w") as f:
        f.write(f"""worker_processes 1; pid {work}/nginx.pid; error_log {work}/error.log warn;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 100000000; sendfile on; default_type image/jpeg;
  client_body_temp_path {work}; proxy_temp_path {work}; fastcgi_temp_path {work};
  uwsgi_temp_path {work}; scgi_temp_path {work};
  server {{ listen 127.0.0.1:{port}; root {work}; {locations} }} }}
""")
    return subprocess.Popen(["nginx", "-c", os.path.join(work, "nginx.conf"), "-g", "daemon off;"])


def start_thumbd(thumbd, work, *extra):
    """thumbd serving WORK/thumbd.sock with no disk cache and loopback origins allowed; waits
    for the socket. Returns the process and the socket path."""
    sock = os.path.join(work, "thumbd.sock")
    daemon = subprocess.Popen(
        [thumbd, "serve", "--socket", sock, "--cache-dir", "", "--allow-private",
         "--log-level", "warn", *extra], stderr=open(os.path.join(work, "thumbd.log"), "w"))
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    time.sleep(0.2)
    return daemon, sock


def stop(procs, work):
    """Stops the processes started and removes the work directory."""
    for proc in procs:
        proc.terminate()
        proc.wait()
    shutil.rmtree(work, ignore_errors=True)


class Connection:
    """One kept-alive HTTP/1.1 connection to a Unix socket."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.buffer = b""

    def get(self, target):
        self.sock.sendall(f"GET {target} HTTP/1.1\r\nHost: b\r\n\r\n".encode())
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self.buffer += self.sock.recv(65536)
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0][9:12]), headers, body


def metric(conn, name):
    _, _, body = conn.get("/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None
