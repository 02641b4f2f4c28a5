#!/usr/bin/env bash
# Two thumbd builds, A and B, side by side in one run: memory hits per second over the Unix
# socket (bench/socketload.c, 4 keep-alive connections), misses per second through the daemon
# (4 connections asking for distinct sizes of the photos, no disk cache: every request a
# decode), and the wall time of `thumbd thumbnail` over a photo set, alternating A and B each
# round; prints each round and the median B/A ratio of each. For a change of build settings
# (docs/PACKAGE.md) or of structure (docs/ARCHITECTURE.md, "Counts").
#
# Usage: bench/build_ab.sh THUMBD_A THUMBD_B [ROUNDS] [PHOTO_DIR]
set -euo pipefail
a=$1 b=$2 rounds=${3:-5} photos=${4:-../shared/corpus/photo}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
gcc -O2 -pthread "$(dirname "$0")/socketload.c" -o "$work/socketload"
mkdir -p "$work/root"
cp ../shared/corpus/photo/coil/normal.jpg "$work/root/photo.jpg"
mapfile -t files < <(find "$photos" -maxdepth 2 -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | sort | head -n 40)

hits() { # binary -> requests per second
  local sock="$work/t.sock"
  rm -rf "$work/cache" "$sock"
  "$1" serve --socket "$sock" --cache-dir "$work/cache" --file-root "$work/root" \
    --log-level warn &
  local pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
  local target="/v1/thumbnail?url=file://$work/root/photo.jpg&w=128&h=128"
  curl -sf --unix-socket "$sock" "http://x$target" -o /dev/null
  "$work/socketload" "unix:$sock" "$target" 4 5 | awk '{print $1}'
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

misses() { # binary -> requests per second, every one a decode
  local sock="$work/m.sock"
  rm -rf "$sock"
  "$1" serve --socket "$sock" --cache-dir "" --file-root "$work/root" --log-level warn &
  local pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
  python3 - "$sock" "$work/root/photo.jpg" <<'PY'
import socket, sys, threading, time
sock_path, photo = sys.argv[1], sys.argv[2]
widths = list(range(64, 64 + 160))
def get(conn, target):
    conn.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
    while len(body) < length:
        body += conn.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head[:40]
def worker(mine):
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(sock_path)
    for w in mine:
        get(conn, f"/v1/thumbnail?url=file://{photo}&w={w}&h={w}")
start = time.monotonic()
threads = [threading.Thread(target=worker, args=(widths[i::4],)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(f"{len(widths) / (time.monotonic() - start):.1f}")
PY
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

thumbnails() { # binary -> seconds
  rm -rf "$work/out"; mkdir -p "$work/out"
  local start end
  start=$(date +%s.%N)
  "$1" thumbnail "${files[@]}" --size 256x256 --jobs 1 --output "$work/out/" >/dev/null 2>&1 || true
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

hit_ratios=() miss_ratios=() time_ratios=()
for round in $(seq "$rounds"); do
  ha=$(hits "$a"); hb=$(hits "$b")
  ma=$(misses "$a"); mb=$(misses "$b")
  ta=$(thumbnails "$a"); tb=$(thumbnails "$b")
  hr=$(echo "scale=3; $hb / $ha" | bc); mr=$(echo "scale=3; $mb / $ma" | bc)
  tr=$(echo "scale=3; $tb / $ta" | bc)
  echo "round $round: hits/s A $ha B $hb (B/A $hr); misses/s A $ma B $mb (B/A $mr); thumbnail s A $ta B $tb (B/A $tr)"
  hit_ratios+=("$hr"); miss_ratios+=("$mr"); time_ratios+=("$tr")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "median B/A: memory hits/s $(median "${hit_ratios[@]}"), misses/s $(median "${miss_ratios[@]}"), thumbnail wall time $(median "${time_ratios[@]}") (${#files[@]} photos)"
