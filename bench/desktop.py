#!/usr/bin/python3
"""thumbd against tumblerd as the desktop's thumbnailer: the same files, the same D-Bus
client, interleaved runs, `normal` and `large` flavors.

Each run starts a session bus of its own (dbus-daemon with no service folders) and one
engine on it under GNU time: tumblerd (Debian's tumbler, the service Thunar asks) or
`thumbd serve --dbus`. It then Queues every file in one request, as a file manager does for
a folder, with the MIME types GLib gives them, and times Queue to Finished. The engine is
stopped and GNU time gives its peak RSS. Rounds alternate the order of the engines; the
figures are medians of the per-round ratios thumbd / tumbler.

Quality: each engine's entries (first round) against an area-average reference: Pillow's
full decode, upright (EXIF), in sRGB when the file has a profile, reduced with Image.BOX to
the entry's size, both composited over mid-grey; PSNR (RGB) averaged over the files both
engines thumbnailed.

    /usr/bin/python3 bench/desktop.py [--rounds 3] [--copies 4] [--thumbd PATH] [DIR...]

Files: DIR... (every .jpg, .jpeg, .png, .gif below them), or by default the shared corpus's
camera and phone photos (kinds photo, exif-orientation, icc: what a folder of pictures
holds). `--kinds all` adds the format test suites; there the reference is not neutral:
Pillow ignores PNG gAMA (PngSuite's images are mostly gamma 1.0), which thumbd applies as
browsers do, so its PSNR on them measures Pillow, not the thumbnail. Each is copied --copies times, so every URI is a file
of its own. Needs: tumbler, dbus-daemon, python3-gi, python3-pil (scripts/bootstrap);
build first: swift build -c release --static-swift-stdlib --product thumbd (the binary
docs/DESKTOP.md installs).
"""
import argparse
import hashlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402
from PIL import Image  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from picture_reference import (EXTENSIONS, corpus_files, flatten, psnr,  # noqa: E402
                               reference)

HERE = os.path.dirname(os.path.abspath(__file__))
TUMBLERD = "/usr/lib/x86_64-linux-gnu/tumbler-1/tumblerd"
NAME = "org.freedesktop.thumbnails.Thumbnailer1"
PATH = "/org/freedesktop/thumbnails/Thumbnailer1"


def bus_config(directory, address):
    path = os.path.join(directory, "bus.conf")
    with open(path, "w") as f:
        f.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>{address}</listen>
<policy context="default"><allow send_destination="*" eavesdrop="true"/>
<allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
""")
    return path


def mime_type(path):
    info = Gio.File.new_for_path(path).query_info(
        "standard::content-type", Gio.FileQueryInfoFlags.NONE, None)
    return Gio.content_type_get_mime_type(info.get_content_type()) or ""


def child_of(pid):
    for _ in range(200):
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                children = f.read().split()
            if children:
                return int(children[0])
        except OSError:
            pass
        time.sleep(0.01)
    raise RuntimeError("the engine did not start")


def run(engine, command, files, flavor, thumbd):
    """One engine over every file: seconds to Finished, peak RSS (KiB), URIs Ready, cache."""
    work = tempfile.mkdtemp(prefix="desktop-bench-")
    address = "unix:path=" + os.path.join(work, "bus")
    cache_home = os.path.join(work, "cache")
    env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address, XDG_CACHE_HOME=cache_home,
               XDG_RUNTIME_DIR=work)
    bus = subprocess.Popen(["dbus-daemon", "--config-file=" + bus_config(work, address),
                            "--nofork", "--nopidfile"], stderr=subprocess.DEVNULL)
    while not os.path.exists(os.path.join(work, "bus")):
        time.sleep(0.01)
    rss_file = os.path.join(work, "rss")
    if engine == "tumbler":
        argv = [TUMBLERD]
    else:
        # As Config/thumbd-desktop.service runs it.
        argv = [thumbd, "serve", "--dbus", address, "--socket", os.path.join(work, "s.sock"),
                "--cache-dir", "", "--allow-scheme", "file"]
    timed = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_file, *argv], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = child_of(timed.pid)
    connection = Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
        | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
    while True:
        owned = connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                     "org.freedesktop.DBus", "NameHasOwner",
                                     GLib.Variant("(s)", (NAME,)), None, 0, -1, None)
        if owned.unpack()[0]:
            break
        time.sleep(0.01)
    loop = GLib.MainLoop()
    state = {"handle": None, "ready": [], "errors": 0, "finished": False}

    def on_signal(conn, sender, path, interface, member, parameters):
        values = parameters.unpack()
        if values[0] != state["handle"]:
            return
        if member == "Ready":
            state["ready"] += values[1]
        elif member == "Error":
            state["errors"] += len(values[1])
        elif member == "Finished":
            state["finished"] = True
            loop.quit()

    connection.signal_subscribe(None, NAME, None, PATH, None, Gio.DBusSignalFlags.NONE,
                                on_signal)
    uris = [Gio.File.new_for_path(f).get_uri() for f in files]
    mimes = [mime_type(f) for f in files]
    start = time.perf_counter()
    reply = connection.call_sync(NAME, PATH, NAME, "Queue",
                                 GLib.Variant("(asasssu)", (uris, mimes, flavor, "default", 0)),
                                 None, 0, -1, None)
    state["handle"] = reply.unpack()[0]
    GLib.timeout_add_seconds(1800, loop.quit)
    loop.run()
    seconds = time.perf_counter() - start
    os.kill(pid, signal.SIGTERM)
    timed.wait()
    with open(rss_file) as f:
        rss = int(f.read().split()[-1])
    connection.close_sync(None)
    bus.kill()
    bus.wait()
    return {"seconds": seconds, "rss": rss, "ready": state["ready"], "errors": state["errors"],
            "finished": state["finished"], "work": work}


def quality(result, flavor, files, uris):
    scores = {}
    for path, uri in zip(files, uris):
        if uri not in result["ready"]:
            continue
        entry = os.path.join(result["work"], "cache", "thumbnails", flavor,
                             hashlib.md5(uri.encode()).hexdigest() + ".png")
        try:
            thumbnail = Image.open(entry)
            thumbnail.load()
            scores[uri] = psnr(flatten(thumbnail), reference(path, thumbnail.size))
        except (OSError, ValueError):
            continue
    return scores


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--flavors", default="normal,large")
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release",
                                                         "thumbd"))
    parser.add_argument("--kinds", default="photo,exif-orientation,icc",
                        help="corpus kinds when no DIR is given (photo,exif-orientation,icc: "
                        "camera and phone JPEGs; all: every kind, with PngSuite's test images)")
    parser.add_argument("dirs", nargs="*")
    args = parser.parse_args()
    sources = ([os.path.join(root, name) for d in args.dirs for root, _, names in os.walk(d)
                for name in names if name.lower().endswith(EXTENSIONS)]
               if args.dirs else corpus_files(
                   {"photo", "exif-orientation", "icc", "jpeg-valid", "png-valid", "gif-valid"}
                   if args.kinds == "all" else set(args.kinds.split(","))))
    folder = tempfile.mkdtemp(prefix="desktop-bench-files-")
    files = []
    for copy in range(args.copies):
        for index, source in enumerate(sources):
            target = os.path.join(folder, f"{copy}-{index}-{os.path.basename(source)}")
            shutil.copyfile(source, target)
            files.append(target)
    uris = [Gio.File.new_for_path(f).get_uri() for f in files]
    print(f"{len(files)} files ({len(sources)} sources x {args.copies}), "
          f"{args.rounds} rounds, thumbd {os.path.realpath(args.thumbd)}", flush=True)
    rows = []
    for flavor in args.flavors.split(","):
        ratios_time, ratios_rss, figures = [], [], {"tumbler": [], "thumbd": []}
        scores = {}
        for round_number in range(args.rounds):
            order = ["tumbler", "thumbd"] if round_number % 2 == 0 else ["thumbd", "tumbler"]
            results = {}
            for engine in order:
                results[engine] = run(engine, None, files, flavor, args.thumbd)
                r = results[engine]
                print(f"  {flavor} round {round_number + 1} {engine:8} {r['seconds']:7.2f} s "
                      f"{r['rss'] / 1024:6.1f} MiB  ready {len(r['ready'])} errors "
                      f"{r['errors']}{'' if r['finished'] else ' (no Finished)'}", flush=True)
                figures[engine].append(r)
            ratios_time.append(results["thumbd"]["seconds"] / results["tumbler"]["seconds"])
            ratios_rss.append(results["thumbd"]["rss"] / results["tumbler"]["rss"])
            if round_number == 0:
                for engine in ("tumbler", "thumbd"):
                    scores[engine] = quality(results[engine], flavor, files, uris)
            for r in results.values():
                shutil.rmtree(r["work"], ignore_errors=True)
        common = set(scores["tumbler"]) & set(scores["thumbd"])
        mean = {e: statistics.mean(scores[e][u] for u in common) if common else 0
                for e in scores}
        worst = {e: min((scores[e][u] for u in common), default=0) for e in scores}
        rows.append((flavor, statistics.median(figures["tumbler"][i]["seconds"]
                                               for i in range(args.rounds)),
                     statistics.median(figures["thumbd"][i]["seconds"]
                                       for i in range(args.rounds)),
                     statistics.median(ratios_time),
                     statistics.median(r["rss"] for r in figures["tumbler"]) / 1024,
                     statistics.median(r["rss"] for r in figures["thumbd"]) / 1024,
                     statistics.median(ratios_rss),
                     len(figures["tumbler"][0]["ready"]), len(figures["thumbd"][0]["ready"]),
                     len(common), mean, worst))
    print()
    print("| flavor | tumbler s | thumbd s | time ratio | tumbler MiB | thumbd MiB | RSS ratio "
          "| Ready tumbler / thumbd | PSNR tumbler | PSNR thumbd | worst tumbler | worst thumbd |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (flavor, tumbler_s, thumbd_s, time_ratio, tumbler_rss, thumbd_rss, rss_ratio,
         tumbler_ready, thumbd_ready, common, mean, worst) in rows:
        print(f"| {flavor} | {tumbler_s:.2f} | {thumbd_s:.2f} | {time_ratio:.2f} | "
              f"{tumbler_rss:.1f} | {thumbd_rss:.1f} | {rss_ratio:.2f} | {tumbler_ready} / "
              f"{thumbd_ready} | {mean['tumbler']:.2f} | {mean['thumbd']:.2f} | "
              f"{worst['tumbler']:.2f} | {worst['thumbd']:.2f} |")
    print(f"\nPSNR over the {common} files both engines thumbnailed (dB, RGB over mid-grey).")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
