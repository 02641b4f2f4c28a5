#!/usr/bin/env bash
# Progressive JPEGs at 256x256: `thumbd thumbnail` on 18 MP files, against the same image saved
# as baseline (peak RSS) and against an earlier build of thumbd (time), interleaved, median of
# ROUNDS. The picture is compared too: PNG output of this build against the earlier build's
# (libjpeg's whole-image decode at 1/8), PSNR over RGB.
#
# Usage: THUMBD_BEFORE=path/to/older/thumbd [ROUNDS=7] bench/progressive.sh
# Needs jpegtran, cjpeg and djpeg (libjpeg-turbo-progs), GNU time, Python 3 with Pillow and
# numpy. Build first: swift build -c release.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
thumbd=${THUMBD:-$here/../.build/release/thumbd}
before=${THUMBD_BEFORE:?set THUMBD_BEFORE to a thumbd built before the DC-scan path}
rounds=${ROUNDS:-7}
photo=$here/../../shared/corpus/photo/coil/large.jpg
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 18 MP (3456x5184) from the corpus's 24 MP photo: 4:2:0 as shot, and re-encoded 4:4:4.
jpegtran -crop 3456x5184+0+0 -copy none -optimize -outfile "$work/base420.jpg" "$photo"
jpegtran -progressive -outfile "$work/prog420.jpg" "$work/base420.jpg"
djpeg -ppm "$work/base420.jpg" > "$work/full.ppm"
cjpeg -sample 1x1 -quality 92 -optimize "$work/full.ppm" > "$work/base444.jpg"
jpegtran -progressive -outfile "$work/prog444.jpg" "$work/base444.jpg"
rm "$work/full.ppm"

# One run: "seconds KiB" (wall clock in ms resolution, peak RSS from GNU time).
run() {
  local start=$EPOCHREALTIME kib
  kib=$(/usr/bin/time -f "%M" "$1" thumbnail "$2" --size 256x256 --format png \
    -o "$work/out.png" 2>&1 >/dev/null | tail -1)
  echo "$(echo "$EPOCHREALTIME - $start" | bc -l) $kib"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '| file | build | median s | median peak RSS MiB |\n|---|---|---:|---:|\n'
for file in base420 prog420 base444 prog444; do
  : > "$work/now.t"; : > "$work/now.m"; : > "$work/before.t"; : > "$work/before.m"
  for _ in $(seq "$rounds"); do
    read -r t m < <(run "$thumbd" "$work/$file.jpg"); echo "$t" >> "$work/now.t"; echo "$m" >> "$work/now.m"
    read -r t m < <(run "$before" "$work/$file.jpg"); echo "$t" >> "$work/before.t"; echo "$m" >> "$work/before.m"
  done
  for build in now before; do
    printf '| %s | %s | %.3f | %.1f |\n' "$file" "$build" "$(median < "$work/$build.t")" \
      "$(echo "$(median < "$work/$build.m") / 1024" | bc -l)"
  done
done

echo
echo "PSNR of this build's 256x256 PNG against the earlier build's (libjpeg at 1/8):"
for file in prog420 prog444; do
  "$thumbd" thumbnail "$work/$file.jpg" --size 256x256 --format png -o "$work/now.png" 2>/dev/null
  "$before" thumbnail "$work/$file.jpg" --size 256x256 --format png -o "$work/before.png" 2>/dev/null
  python3 - "$work/now.png" "$work/before.png" "$file" <<'EOF'
import sys
import numpy
from PIL import Image
a = numpy.asarray(Image.open(sys.argv[1]).convert("RGB"), dtype=numpy.float64)
b = numpy.asarray(Image.open(sys.argv[2]).convert("RGB"), dtype=numpy.float64)
mse = ((a - b) ** 2).mean()
print(f"  {sys.argv[3]}: {'identical' if mse == 0 else f'{10 * numpy.log10(255 ** 2 / mse):.2f} dB'}")
EOF
done
