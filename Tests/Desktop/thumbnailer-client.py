#!/usr/bin/python3
"""A Thumbnailer1 client written from the freedesktop thumbnail management D-Bus
specification and the Thumbnail Managing Standard, not from thumbd's code: it
queues requests over GLib's own D-Bus (GDBus), follows their signals, and checks
every thumbnail a Ready names as the standard describes it, and as GLib's own
check (thumbnail::path, thumbnail::is-valid) sees it.

    thumbnailer-client.py PLAN.json

PLAN: {"cache": THUMBNAILS_DIR, "timeout": SECONDS, "requests": [REQUEST...]}
REQUEST: {"name": N, "uris": [...], "flavor": "normal", "scheduler": "default",
          "dequeue_after": K (optional: Dequeue once K Ready have come),
          "replace_after": K, "replace": REQUEST (optional: after K Ready, Queue
          REQUEST with handle_to_unqueue set to this one's handle),
          "mime_types": [...] (optional: sent instead of GIO's guess per URI)}

Prints one JSON object: per request its handle, the URIs Ready and in Error,
the Ready count when it was dequeued or replaced, whether Started came first and
Finished last, and "problems": every way a signal or a thumbnail broke the
specification.
"""
import hashlib
import json
import os
import stat
import struct
import sys
import zlib

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

NAME = "org.freedesktop.thumbnails.Thumbnailer1"
PATH = "/org/freedesktop/thumbnails/Thumbnailer1"
SIZES = {"normal": 128, "large": 256, "x-large": 512, "xx-large": 1024}


def png_texts(path):
    """The tEXt keys before the first IDAT, IHDR's fields, or a problem."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None, None, "not a PNG"
    offset, texts, ihdr = 8, {}, None
    while offset + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        body = data[offset + 8 : offset + 8 + length]
        crc = data[offset + 8 + length : offset + 12 + length]
        if len(crc) != 4 or struct.unpack(">I", crc)[0] != zlib.crc32(kind + body):
            return None, None, "a chunk's CRC is wrong"
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            texts[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"IDAT":
            return texts, ihdr, None
        offset += 12 + length
    return None, None, "no IDAT"


def check_entry(cache, flavor, uri):
    """Problems of the thumbnail of uri in flavor, as the standard defines it."""
    name = hashlib.md5(uri.encode()).hexdigest() + ".png"
    path = os.path.join(cache, flavor, name)
    try:
        info = os.lstat(path)
    except OSError:
        return ["%s: no thumbnail at %s/%s" % (uri, flavor, name)]
    problems = []
    if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != 0o600:
        problems.append("%s: mode %o" % (uri, info.st_mode))
    texts, ihdr, problem = png_texts(path)
    if problem:
        return problems + ["%s: %s" % (uri, problem)]
    width, height, depth, _, _, _, interlace = ihdr
    if depth != 8 or interlace != 0:
        problems.append("%s: bit depth %d, interlace %d" % (uri, depth, interlace))
    if max(width, height) > SIZES[flavor]:
        problems.append("%s: %dx%d is over %s" % (uri, width, height, flavor))
    if texts.get("Thumb::URI") != uri:
        problems.append("%s: Thumb::URI is %r" % (uri, texts.get("Thumb::URI")))
    source = Gio.File.new_for_uri(uri).get_path()
    try:
        source_info = os.stat(source)
    except OSError:
        return problems
    mtime = texts.get("Thumb::MTime", "")
    if not mtime.isdigit() or int(mtime) != int(source_info.st_mtime):
        problems.append("%s: Thumb::MTime %r, st_mtime %d" % (uri, mtime, source_info.st_mtime))
    size = texts.get("Thumb::Size")
    if size is not None and size != str(source_info.st_size):
        problems.append("%s: Thumb::Size %r" % (uri, size))
    if "Thumb::Mimetype" not in texts or "Software" not in texts:
        problems.append("%s: keys %s" % (uri, sorted(texts)))
    return problems


def mime_type(uri):
    """The MIME type GLib gives the file, as a file manager sends it (tumbler picks its
    thumbnailer by it); for what cannot be queried, a guess from the name."""
    try:
        info = Gio.File.new_for_uri(uri).query_info(
            "standard::content-type", Gio.FileQueryInfoFlags.NONE, None)
        return Gio.content_type_get_mime_type(info.get_content_type()) or ""
    except GLib.Error:
        guess, _ = Gio.content_type_guess(uri, None)
        return Gio.content_type_get_mime_type(guess) or ""


def glib_check(uri):
    """Problems GLib's own check finds: the thumbnail it would show, and whether it takes it
    as valid (what Nautilus and Thunar's file chooser ask)."""
    info = Gio.File.new_for_uri(uri).query_info(
        "thumbnail::path,thumbnail::is-valid", Gio.FileQueryInfoFlags.NONE, None)
    if not info.get_attribute_byte_string("thumbnail::path"):
        return ["%s: GLib finds no thumbnail" % uri]
    if not info.get_attribute_boolean("thumbnail::is-valid"):
        return ["%s: GLib takes the thumbnail as not valid" % uri]
    return []


def main():
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    loop = GLib.MainLoop()
    state = {"problems": [], "by_handle": {}, "requests": {}}

    def queue(request, unqueue=0):
        record = {
            "handle": 0, "ready": [], "errors": [], "signals": [], "ready_at_end": None,
            "flavor": request.get("flavor", "normal"),
        }
        state["requests"][request["name"]] = record
        args = GLib.Variant(
            "(asasssu)",
            (request["uris"],
             request.get("mime_types") or [mime_type(uri) for uri in request["uris"]],
             record["flavor"],
             request.get("scheduler", "default"), unqueue))
        reply = bus.call_sync(NAME, PATH, NAME, "Queue", args, None, 0, -1, None)
        (record["handle"],) = reply.unpack()
        state["by_handle"][record["handle"]] = (request, record)
        return record

    def unfinished():
        return [r for r in state["requests"].values() if "Finished" not in r["signals"]]

    def on_signal(connection, sender, path, interface, member, parameters):
        values = parameters.unpack()
        entry = state["by_handle"].get(values[0])
        if entry is None:
            state["problems"].append("%s for unknown handle %d" % (member, values[0]))
            return
        request, record = entry
        signals = record["signals"]
        if "Finished" in signals:
            state["problems"].append("%s after Finished for %s" % (member, request["name"]))
        if member != "Started" and "Started" not in signals:
            state["problems"].append("%s before Started for %s" % (member, request["name"]))
        signals.append(member)
        if member == "Ready":
            record["ready"] += values[1]
            count = len(record["ready"])
            if record["ready_at_end"] is None:
                if request.get("dequeue_after") and count >= request["dequeue_after"]:
                    record["ready_at_end"] = count
                    bus.call_sync(NAME, PATH, NAME, "Dequeue",
                                  GLib.Variant("(u)", (record["handle"],)), None, 0, -1, None)
                elif request.get("replace_after") and count >= request["replace_after"]:
                    record["ready_at_end"] = count
                    queue(request["replace"], unqueue=record["handle"])
        elif member == "Error":
            for uri in values[1]:
                record["errors"].append({"uri": uri, "code": values[2], "message": values[3]})
        elif member == "Finished" and not unfinished():
            loop.quit()

    bus.signal_subscribe(None, NAME, None, PATH, None, Gio.DBusSignalFlags.NONE, on_signal)
    for request in plan["requests"]:
        queue(request)

    def timed_out():
        state["problems"].append("timed out waiting for Finished")
        loop.quit()

    GLib.timeout_add_seconds(plan.get("timeout", 600), timed_out)
    loop.run()
    for record in state["requests"].values():
        for uri in record["ready"]:
            state["problems"] += check_entry(plan["cache"], record["flavor"], uri)
            state["problems"] += glib_check(uri)
        record["started_first"] = record["signals"][:1] == ["Started"]
        record["finished_last"] = record["signals"][-1:] == ["Finished"]
        del record["signals"]
    print(json.dumps({"requests": state["requests"], "problems": state["problems"]}))


main()
