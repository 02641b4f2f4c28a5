#!/usr/bin/python3
"""Coverage against tumbler: the same folder, the same installed programs, over D-Bus.

A folder of real files of every kind a home folder holds (the shared corpus's TIFF, BMP, ICO,
JPEG XL, RAW, SVG, PDF and video, valid and damaged, the native photo types, the installed
fonts) is queued in one request to tumblerd, then to `thumbd serve --dbus`, each on a session
bus of its own, with the MIME types GLib gives the files (as Thunar does). Per MIME type it
prints how many files each service made (`Ready`), the files tumbler made that thumbd did not
(the figure that must be 0), and whether GLib (`gio info`) finds every entry thumbd wrote
valid. Then it times both, interleaved, on the types thumbd hands to the installed
thumbnailers, and gives each service's peak RSS.

    /usr/bin/python3 bench/desktop_coverage.py [--rounds 3] [--flavor normal] [--thumbd PATH]

Needs what scripts/bootstrap's test list installs: tumbler and tumbler-plugins-extra,
ffmpegthumbnailer, evince, libgdk-pixbuf2.0-bin, librsvg2-common, gnome-font-viewer,
heif-thumbnailer, bubblewrap, dbus-daemon, python3-gi. Build first: scripts/flags'
thumbd_build_installed (the binary docs/DESKTOP.md installs).
"""
import argparse
import collections
import glob
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import desktop  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "shared", "corpus")
# The types thumbd decodes itself (SourceFormat.desktopMediaTypes, and videos, PDFs and SVGs
# through its own worker: FrameSource.desktopMediaTypes); the rest are timed as the installed
# thumbnailers' work.
NATIVE = ("image/jpeg", "image/png", "image/webp", "image/gif", "image/heif", "image/heic",
          "image/avif", "image/bmp", "image/x-bmp", "image/x-ms-bmp", "image/vnd.microsoft.icon",
          "image/x-icon", "image/x-win-bitmap", "image/tiff", "image/jxl", "image/x-dcraw",
          "image/x-adobe-dng", "image/x-canon-cr2", "image/x-canon-cr3", "image/x-canon-crw",
          "image/x-fuji-raf", "image/x-nikon-nef", "image/x-nikon-nrw", "image/x-olympus-orf",
          "image/x-panasonic-rw2", "image/x-pentax-pef", "image/x-samsung-srw", "image/x-sony-arw",
          "video/mp4", "video/quicktime", "video/x-m4v", "video/3gpp", "video/3gpp2",
          "video/x-matroska", "video/webm", "video/x-msvideo", "video/vnd.avi", "video/avi",
          "video/msvideo", "video/mp2t", "video/mpeg", "video/x-mpeg2", "video/x-flv",
          "video/flv", "video/ogg", "video/x-ogm+ogg", "video/x-theora+ogg", "video/x-ms-wmv",
          "video/x-ms-asf", "application/vnd.ms-asf", "application/pdf", "application/x-pdf",
          "image/pdf", "image/svg+xml", "image/svg+xml-compressed", "image/svg")


def corpus_rows(manifest):
    """(path, expectation) of each row, by the manifest's own header."""
    with open(os.path.join(CORPUS, manifest)) as f:
        lines = f.read().splitlines()
    header = lines[0].split("\t")
    expect = header.index("expect") if "expect" in header else header.index("expected")
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) > expect:
            yield fields[0], fields[expect]


def folder():
    """A temporary folder of hard links: the corpus's second round of formats (every row),
    photos of the native types, and the installed fonts."""
    work = tempfile.mkdtemp(prefix="desktop-coverage-")
    os.chmod(work, 0o755)
    files = []
    sources = [path for path, _ in corpus_rows("MANIFEST-formats2.tsv")]
    sources += [path for path, expect in corpus_rows("MANIFEST.tsv")
                if expect == "decode-ok" and path.startswith("photo/")][:24]
    sources += [path for path, expect in corpus_rows("MANIFEST.tsv")
                if expect == "decode-ok" and path.endswith(".png")][:12]
    sources += [path for path, expect in corpus_rows("MANIFEST-formats.tsv")
                if expect == "decode-ok"][:24]
    for index, relative in enumerate(sources):
        target = os.path.join(work, "%03d-%s" % (index, os.path.basename(relative)))
        try:
            os.link(os.path.join(CORPUS, relative), target)
        except OSError:
            shutil.copyfile(os.path.join(CORPUS, relative), target)
        files.append(target)
    fonts = sorted(glob.glob("/usr/share/fonts/truetype/*/*.ttf"))[:4]
    fonts += sorted(glob.glob("/usr/share/fonts/opentype/*/*.otf"))[:2]
    for index, font in enumerate(fonts):
        target = os.path.join(work, "font-%d-%s" % (index, os.path.basename(font)))
        shutil.copyfile(font, target)
        files.append(target)
    for path in files:
        os.chmod(path, 0o644)
    return work, files


def run(engine, files, flavor, thumbd, timeout=900, options=(), mimes=None, env_extra=None):
    """One engine over `files` in one Queue: as desktop.run, but an engine that dies before
    `Finished` (tumblerd runs its plugins in its own process) ends the run, recorded. `mimes`
    gives the files' types (else GLib's guess); `env_extra` adds to the engine's environment."""
    import signal
    import time
    from gi.repository import Gio, GLib
    work = tempfile.mkdtemp(prefix="desktop-coverage-run-")
    address = "unix:path=" + os.path.join(work, "bus")
    env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address,
               XDG_CACHE_HOME=os.path.join(work, "cache"), XDG_RUNTIME_DIR=work,
               **(env_extra or {}))
    bus = subprocess.Popen(["dbus-daemon", "--config-file=" + desktop.bus_config(work, address),
                            "--nofork", "--nopidfile"], stderr=subprocess.DEVNULL)
    while not os.path.exists(os.path.join(work, "bus")):
        time.sleep(0.01)
    argv = ([desktop.TUMBLERD] if engine == "tumbler" else
            [thumbd, "serve", "--dbus", address, "--socket", os.path.join(work, "s.sock"),
             "--cache-dir", "", "--allow-scheme", "file", *options])
    rss_file = os.path.join(work, "rss")
    timed = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_file, *argv], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    connection = Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
        | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
    while not connection.call_sync(
            "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "NameHasOwner", GLib.Variant("(s)", (desktop.NAME,)), None, 0, -1,
            None).unpack()[0]:
        time.sleep(0.01)
    loop = GLib.MainLoop()
    state = {"handle": None, "ready": [], "errors": [], "codes": [], "finished": False,
             "died": False}

    def on_signal(conn, sender, path, interface, member, parameters):
        values = parameters.unpack()
        if values[0] != state["handle"]:
            return
        if member == "Ready":
            state["ready"] += values[1]
        elif member == "Error":
            state["errors"] += values[1]
            state["codes"] += [values[2]] * len(values[1])
        elif member == "Finished":
            state["finished"] = True
            loop.quit()

    def watch():
        if timed.poll() is not None:
            state["died"] = True
            loop.quit()
            return False
        return True

    connection.signal_subscribe(None, desktop.NAME, None, desktop.PATH, None,
                                Gio.DBusSignalFlags.NONE, on_signal)
    uris = [Gio.File.new_for_path(f).get_uri() for f in files]
    mimes = mimes or [desktop.mime_type(f) for f in files]
    start = time.perf_counter()
    reply = connection.call_sync(desktop.NAME, desktop.PATH, desktop.NAME, "Queue",
                                 GLib.Variant("(asasssu)", (uris, mimes, flavor, "default", 0)),
                                 None, 0, -1, None)
    state["handle"] = reply.unpack()[0]
    GLib.timeout_add(100, watch)
    GLib.timeout_add_seconds(timeout, loop.quit)
    loop.run()
    seconds = time.perf_counter() - start
    if timed.poll() is None:
        for child in open(f"/proc/{timed.pid}/task/{timed.pid}/children").read().split():
            os.kill(int(child), signal.SIGTERM)
    timed.wait()
    try:
        with open(rss_file) as f:
            rss = int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        rss = 0
    connection.close_sync(None)
    bus.kill()
    bus.wait()
    return {"seconds": seconds, "rss": rss, "ready": state["ready"], "errors": state["errors"],
            "codes": state["codes"], "finished": state["finished"], "died": state["died"],
            "work": work,
            "pid": timed.pid}


def gio_valid(cache_home, paths):
    """GLib's verdict on each file's thumbnail: thumbnail::is-valid per path."""
    env = dict(os.environ, XDG_CACHE_HOME=cache_home, GIO_USE_VFS="local")
    verdicts = {}
    for start in range(0, len(paths), 64):
        chunk = paths[start:start + 64]
        text = subprocess.run(["gio", "info", "-a", "standard::name,thumbnail::is-valid"] + chunk,
                              env=env, capture_output=True, text=True).stdout
        current = None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("uri:"):
                current = line.split("uri:", 1)[1].strip()
            elif line.startswith("thumbnail::is-valid:") and current:
                verdicts[current] = line.endswith("TRUE")
    return verdicts


def time_both(args, delegated):
    """Interleaved rounds of both services over `delegated` in one request: medians."""
    times = collections.defaultdict(list)
    rss = collections.defaultdict(list)
    for round_ in range(args.rounds):
        order = ("tumbler", "thumbd") if round_ % 2 == 0 else ("thumbd", "tumbler")
        for engine in order:
            result = run(engine, delegated, args.flavor, args.thumbd, args.timeout,
                         args.thumbd_option)
            if result["died"] or not result["finished"]:
                print(f"{engine} did not finish the timed round {round_}")
            times[engine].append(result["seconds"])
            rss[engine].append(result["rss"])
            shutil.rmtree(result["work"], ignore_errors=True)
    ratios = [d / t for d, t in zip(times["thumbd"], times["tumbler"])]
    print(f"\ndelegated types, {len(delegated)} files, {args.flavor}, {args.rounds} rounds:")
    print(f"  tumbler {statistics.median(times['tumbler']):.2f} s, "
          f"thumbd {statistics.median(times['thumbd']):.2f} s, "
          f"ratio thumbd/tumbler median {statistics.median(ratios):.2f}")
    print(f"  peak RSS tumbler {statistics.median(rss['tumbler']) / 1024:.0f} MiB, "
          f"thumbd {statistics.median(rss['thumbd']) / 1024:.0f} MiB")


def answered_by_tumbler(args, paths, uris):
    """The files tumbler makes a thumbnail of, each asked alone: a file that hangs or crashes
    tumbler (its plugins run in its own process) would stop a timed round for every file
    queued behind it, and timing both services needs rounds both finish."""
    kept = []
    for path in paths:
        result = run("tumbler", [path], args.flavor, args.thumbd, min(args.timeout, 20), [])
        if result["finished"] and not result["died"] and uris[path] in result["ready"]:
            kept.append(path)
        shutil.rmtree(result["work"], ignore_errors=True)
    print(f"tumbler made {len(kept)} of {len(paths)} files asked alone; timing those")
    return kept


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flavor", default="normal")
    parser.add_argument("--thumbd-option", action="append", default=[],
                        help="an option for thumbd serve (repeat it for more)")
    parser.add_argument("--timing-only", action="store_true",
                        help="skip the coverage table; time the delegated types of --types")
    parser.add_argument("--types", default="",
                        help="with --timing-only: comma-separated MIME types to time (default: "
                        "the types thumbd hands to installed thumbnailers)")
    parser.add_argument("--answered-only", action="store_true",
                        help="with --timing-only: time only the files tumbler makes, each "
                        "asked alone first")
    parser.add_argument("--timeout", type=int, default=300,
                        help="seconds a service has to finish the folder")
    parser.add_argument("--thumbd", default=os.path.join(HERE, "..", ".build", "release",
                                                         "thumbd"))
    args = parser.parse_args()
    work, files = folder()
    mimes = {path: desktop.mime_type(path) for path in files}
    from gi.repository import Gio
    uris = {path: Gio.File.new_for_path(path).get_uri() for path in files}

    if args.timing_only:
        wanted = set(args.types.split(",")) if args.types else {
            m for m in mimes.values() if m not in NATIVE}
        delegated = [p for p in files if mimes[p] in wanted]
        if args.answered_only:
            delegated = answered_by_tumbler(args, delegated, uris)
        time_both(args, delegated)
        shutil.rmtree(work, ignore_errors=True)
        return

    # One request per MIME type, each to a fresh engine: a file that stops tumbler (its
    # plugins run in its own process, with no deadline) costs only its own type's answers.
    by_type = collections.defaultdict(list)
    for path in files:
        by_type[mimes[path]].append(path)
    ready = {"tumbler": set(), "thumbd": set()}
    stopped = {"tumbler": [], "thumbd": []}
    rss = {"tumbler": 0, "thumbd": 0}
    caches = []
    for mime, paths in sorted(by_type.items()):
        for engine in ("tumbler", "thumbd"):
            result = run(engine, paths, args.flavor, args.thumbd, args.timeout,
                         args.thumbd_option)
            ready[engine] |= set(result["ready"])
            rss[engine] = max(rss[engine], result["rss"])
            if result["died"] or not result["finished"]:
                answers = len(result["ready"]) + len(result["errors"])
                stopped[engine].append(
                    f"{mime}: {'died' if result['died'] else 'no Finished in time'} after "
                    f"{answers} of {len(paths)} answers")
            if engine == "thumbd":
                caches.append((os.path.join(result["work"], "cache"), paths))
            else:
                shutil.rmtree(result["work"], ignore_errors=True)
    valid = {}
    for cache_home, paths in caches:
        valid.update(gio_valid(cache_home, [p for p in paths if uris[p] in ready["thumbd"]]))
        shutil.rmtree(os.path.dirname(cache_home), ignore_errors=True)
    for engine, problems in stopped.items():
        for problem in problems:
            print(f"{engine} stopped: {problem}")
    print(f"peak RSS over the per-type runs: tumbler {rss['tumbler'] / 1024:.0f} MiB, "
          f"thumbd {rss['thumbd'] / 1024:.0f} MiB\n")

    print("| MIME type | files | tumbler Ready | thumbd Ready | tumbler only | thumbd valid (gio) |")
    print("|---|---|---|---|---|---|")
    missing = []
    for mime in sorted(by_type):
        paths = by_type[mime]
        t = sum(uris[p] in ready["tumbler"] for p in paths)
        d = sum(uris[p] in ready["thumbd"] for p in paths)
        only = [p for p in paths if uris[p] in ready["tumbler"] and uris[p] not in ready["thumbd"]]
        missing += only
        ok = sum(valid.get(uris[p], False) for p in paths if uris[p] in ready["thumbd"])
        print(f"| {mime} | {len(paths)} | {t} | {d} | {len(only)} | {ok}/{d} |")
    total_t, total_d = len(ready["tumbler"]), len(ready["thumbd"])
    print(f"| all | {len(files)} | {total_t} | {total_d} | {len(missing)} | "
          f"{sum(valid.values())}/{total_d} |")
    for path in missing:
        print("tumbler only:", os.path.basename(path), mimes[path])
    invalid = [p for p in files if uris[p] in ready["thumbd"] and not valid.get(uris[p], False)]
    for path in invalid:
        print("not valid for gio:", os.path.basename(path))

    # Timed on the delegated types whose every file tumbler answered in the per-type runs.
    unfinished = {problem.split(":")[0] for problem in stopped["tumbler"]}
    delegated = [p for p in files if mimes[p] not in NATIVE and mimes[p] not in unfinished]
    time_both(args, delegated)
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if missing or invalid else 0)


if __name__ == "__main__":
    main()
