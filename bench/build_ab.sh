#!/usr/bin/env bash
# Two thumbd builds, A and B, side by side in one run: memory hits per second over the Unix
# socket (bench/socketload.c, 4 keep-alive connections) and the wall time of
# `thumbd thumbnail` over a photo set, alternating A and B each round; prints each round and
# the median B/A ratio of both. For a change of build settings (docs/PACKAGE.md).
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

thumbnails() { # binary -> seconds
  rm -rf "$work/out"; mkdir -p "$work/out"
  local start end
  start=$(date +%s.%N)
  "$1" thumbnail "${files[@]}" --size 256x256 --jobs 1 --output "$work/out/" >/dev/null 2>&1 || true
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

hit_ratios=() time_ratios=()
for round in $(seq "$rounds"); do
  ha=$(hits "$a"); hb=$(hits "$b")
  ta=$(thumbnails "$a"); tb=$(thumbnails "$b")
  hr=$(echo "scale=3; $hb / $ha" | bc); tr=$(echo "scale=3; $tb / $ta" | bc)
  echo "round $round: hits/s A $ha B $hb (B/A $hr); thumbnail s A $ta B $tb (B/A $tr)"
  hit_ratios+=("$hr"); time_ratios+=("$tr")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "median B/A: memory hits/s $(median "${hit_ratios[@]}"), thumbnail wall time $(median "${time_ratios[@]}") (${#files[@]} photos)"
