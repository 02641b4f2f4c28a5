#!/usr/bin/python3
"""A hostile installed thumbnailer through the real D-Bus service: each escape's outcome, time
and the daemon's peak RSS.

An entry installed for made-up MIME types runs `python3 %i %o`: the file to thumbnail is the
program, so each case is one file. Each case is queued alone to a fresh `thumbd serve --dbus`
on a session bus of its own (under GNU time), and the script checks from outside what the
case tried: the planted secret in no file thumbd wrote, nothing written outside the output
folder, no connection at a loopback listener, the daemon still up and answering. The test
suite makes the same checks (SandboxTests, InstalledThumbnailersBusTests); this gives the
figures.

    /usr/bin/python3 bench/sandbox_escapes.py [--thumbd PATH]

Needs bubblewrap, dbus-daemon, python3-gi, GNU time. Build first: scripts/flags'
thumbd_build_installed.
"""
import argparse
import os
import shutil
import socket
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import desktop_coverage  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

PNG = """
import os, struct, sys, zlib
def png(width, height, rows):
    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
    return (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))
"""


def cases(secret, outside, port):
    """Name: (what it tries, its program)."""
    return {
        "control": ("nothing: a well-behaved program writes an 8x8 PNG (must be Ready)", """
open(sys.argv[1], 'wb').write(png(8, 8, b''.join(b'\\0' + b'\\x80' * 24 for _ in range(8))))
"""),
        "secret": ("read a planted secret outside its input", f"""
try:
    data = open({secret!r}, 'rb').read()
except Exception as e:
    data = repr(e).encode()
open(sys.argv[1], 'wb').write(data)
"""),
        "write-outside": ("write outside its output folder", f"""
for target in ({outside!r}, '/usr/planted', '/planted', os.path.dirname(sys.argv[0]) + '/planted',
               os.path.dirname(sys.argv[1]) + '/../planted'):
    try:
        open(target, 'w').write('planted')
    except Exception:
        pass
sys.exit(1)
"""),
        "network": ("connect to a loopback listener", f"""
import socket
for family, address in ((socket.AF_INET, ('127.0.0.1', {port})), (socket.AF_INET6, ('::1', {port}))):
    try:
        socket.socket(family, socket.SOCK_STREAM).connect(address)
    except Exception:
        pass
sys.exit(1)
"""),
        "signal-daemon": ("see the daemon's process or signal it", """
import signal
seen = [p for p in os.listdir('/proc') if p.isdigit()]
try:
    os.kill(-1, signal.SIGKILL)
except Exception:
    pass
open(sys.argv[1], 'w').write(repr(seen))
"""),
        "fork-bomb": ("fork without bound", """
for i in range(100000):
    try:
        if os.fork() == 0:
            import time
            time.sleep(60)
            os._exit(0)
    except OSError:
        break
sys.exit(1)
"""),
        "allocate-8g": ("allocate 8 GiB", """
block = bytearray(8 << 30)
open(sys.argv[1], 'wb').write(png(8, 8, bytes(8 * 25)))
"""),
        "output-2g": ("write a 2 GiB output", """
with open(sys.argv[1], 'wb') as f:
    chunk = b'\\0' * (1 << 20)
    for _ in range(2048):
        f.write(chunk)
"""),
        "sleep-forever": ("sleep forever", """
import time
while True:
    time.sleep(3600)
"""),
        "lying-header": ("write a PNG whose header lies", """
open(sys.argv[1], 'wb').write(png(64, 64, b'\\0' * 100))
"""),
        "huge-png": ("write a PNG of 60,000 x 60,000", """
open(sys.argv[1], 'wb').write(png(60000, 60000, b'\\0' * 1000))
"""),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release",
                                                         "thumbd"))
    parser.add_argument("--timeout", type=int, default=60)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="sandbox-escapes-")
    os.chmod(work, 0o755)
    share = os.path.join(work, "share")
    files = os.path.join(work, "files")
    os.makedirs(os.path.join(share, "thumbnailers"))
    os.makedirs(files)
    os.chmod(files, 0o755)
    secret = os.path.join(work, "secret.txt")
    secret_text = "secret-%d" % int.from_bytes(os.urandom(8), "big")
    with open(secret, "w") as f:
        f.write(secret_text)
    os.chmod(secret, 0o644)
    outside = os.path.join(work, "planted-outside")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    table = cases(secret, outside, port)
    with open(os.path.join(share, "thumbnailers", "hostile.thumbnailer"), "w") as f:
        f.write("[Thumbnailer Entry]\nTryExec=/usr/bin/python3\nExec=/usr/bin/python3 %i %o\n"
                "MimeType=" + "".join(f"application/x-hostile-{name};" for name in table) + "\n")

    print("| case | what it tries | answer | seconds | held | daemon peak RSS |")
    print("|---|---|---|---:|---|---:|")
    for name, (tries, program) in table.items():
        path = os.path.join(files, name + ".py")
        with open(path, "w") as f:
            f.write(PNG + program)
        os.chmod(path, 0o644)
        result = desktop_coverage.run(
            "thumbd", [path], "normal", args.thumbd, args.timeout,
            mimes=[f"application/x-hostile-{name}"], env_extra={"XDG_DATA_DIRS": share})
        cache = os.path.join(result["work"], "cache")
        wrote = []
        for root, _, names in os.walk(cache):
            for entry in names:
                with open(os.path.join(root, entry), "rb") as f:
                    if secret_text.encode() in f.read():
                        wrote.append(entry)
        problems = []
        if wrote:
            problems.append("the secret in " + ", ".join(wrote))
        for planted in (outside, "/usr/planted", "/planted", os.path.join(files, "planted")):
            if os.path.exists(planted):
                problems.append("wrote " + planted)
                os.remove(planted)
        try:
            listener.accept()
            problems.append("a connection")
        except BlockingIOError:
            pass
        if result["died"] or not result["finished"]:
            problems.append("the daemon died" if result["died"] else "no Finished")
        answer = ("Ready" if result["ready"] else
                  "Error %s" % ",".join(str(c) for c in sorted(set(result["codes"])))
                  if result["errors"] else "none")
        print(f"| {name} | {tries} | {answer} | {result['seconds']:.2f} | "
              f"{'; '.join(problems) or 'yes'} | {result['rss'] / 1024:.0f} MiB |")
        shutil.rmtree(result["work"], ignore_errors=True)
    listener.close()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
