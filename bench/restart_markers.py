"""How many of the corpus's JPEGs carry restart markers (a DRI segment with a non-zero interval
before their first scan): the JPEGs whose entropy-coded data could be split at restart
boundaries and decoded on several cores (issue 36). Reads each file's markers up to its first
SOS, nothing else; counts by corpus kind, for the files the manifest expects to decode.

    /usr/bin/python3 bench/restart_markers.py [CORPUS_DIR]
"""
import csv
import os
import sys
from collections import defaultdict


def restart_interval(path):
    """The DRI interval in force at the first scan (0: none), or None if not a JPEG."""
    with open(path, "rb") as f:
        data = f.read(1 << 20)  # headers, tables and DRI come before the first scan
    if data[:2] != b"\xff\xd8":
        return None
    i, interval = 2, 0
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return interval
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker == 0xDA:  # SOS: the first scan starts
            return interval
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if marker == 0xDD and length == 4 and i + 6 <= len(data):
            interval = int.from_bytes(data[i + 4:i + 6], "big")
        i += 2 + length
    return interval


def main():
    corpus = sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus"
    rows = list(csv.DictReader(open(os.path.join(corpus, "MANIFEST.tsv")), delimiter="\t"))
    rows += list(csv.DictReader(open(os.path.join(corpus, "MANIFEST-formats.tsv")), delimiter="\t"))
    counts = defaultdict(lambda: [0, 0])
    examples = defaultdict(list)
    for row in rows:
        path = os.path.join(corpus, row["relative_path"])
        if row.get("expected") != "decode-ok" or not os.path.exists(path):
            continue
        interval = restart_interval(path)
        if interval is None:
            continue
        kind = row["kind"]
        counts[kind][0] += 1
        if interval:
            counts[kind][1] += 1
            examples[kind].append(f"{row['relative_path']} ({interval} MCUs)")
    print("| kind | JPEGs | with restart markers |")
    print("|---|---:|---:|")
    total = [0, 0]
    for kind in sorted(counts):
        jpegs, restarts = counts[kind]
        total[0] += jpegs
        total[1] += restarts
        print(f"| {kind} | {jpegs} | {restarts} |")
    print(f"| all | {total[0]} | {total[1]} |")
    for kind in sorted(examples):
        for example in examples[kind]:
            print(f"- {kind}: {example}")


if __name__ == "__main__":
    main()
