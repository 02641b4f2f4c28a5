#!/usr/bin/env bash
# One large JPEG on several cores (issue 36): `thumbd thumbnail` against vipsthumbnail on
# 48 MP JPEGs with a restart marker every row of MCUs (cjpeg -restart 1), which thumbd decodes
# in bands on every idle core, and on the same pictures without restart markers (one piece).
# Both tools at their defaults (--jobs and libvips' threads), 256x256 box, JPEG out, in
# interleaved runs (thumbd, vips, thumbd, vips...); medians of wall time and of peak RSS
# (GNU time, from outside), and the ratio of the medians.
#
# Usage: bench/restart_bands.sh [-n RUNS] [WORKDIR]
#   RUNS     timed runs of each tool on each file (default 7), after one warm-up
#   WORKDIR  where the 48 MP pictures are made (default /tmp/restart-bands)
#   THUMBD=/path/to/thumbd bench/restart_bands.sh   # another build
# Needs: .build/release/thumbd (swift build -c release), vipsthumbnail (libvips-tools),
# cjpeg (libjpeg-turbo-progs), /usr/bin/python3 with PIL (python3-pil), GNU time.
#
# The pictures, from the corpus (../shared/corpus, or $THUMBD_CORPUS):
#   largest  the corpus's largest photo (4000x6000) enlarged to 5656x8484 with Lanczos
#   mosaic   four 12 MP camera and phone photos side by side at about their own resolution,
#            8000x6000: real detail in every tile
#   sky      the mosaic with its upper 40% a smooth gradient: most bytes in the lower part
set -euo pipefail
cd "$(dirname "$0")/.."
runs=7
if [ "${1:-}" = "-n" ]; then
  runs=$2
  shift 2
fi
work=${1:-/tmp/restart-bands}
corpus=${THUMBD_CORPUS:-../shared/corpus}
thumbd=${THUMBD:-$PWD/.build/release/thumbd}
[ -x "$thumbd" ] || { echo "restart_bands: build first: swift build -c release" >&2; exit 1; }
command -v vipsthumbnail > /dev/null || { echo "restart_bands: needs vipsthumbnail" >&2; exit 1; }
mkdir -p "$work/out"

make_pictures() {
  /usr/bin/python3 - "$corpus" "$work" <<'EOF'
import os
import sys
from PIL import Image

corpus, work = sys.argv[1], sys.argv[2]
def photo(relative):
    image = Image.open(os.path.join(corpus, relative))
    image.draft(None, None)
    return image.convert("RGB")

if not os.path.exists(os.path.join(work, "largest.ppm")):
    photo("photo/coil/large.jpg").resize((5656, 8484), Image.LANCZOS).save(
        os.path.join(work, "largest.ppm"))
if not os.path.exists(os.path.join(work, "mosaic.ppm")):
    canvas = Image.new("RGB", (8000, 6000))
    tiles = [
        "photo/sdwebimage/TestJFIF.jpg",
        "photo/glide/issue387_rotated_jpeg.jpg",
        "photo/exif-samples/30-type_error.jpg",
        "photo/exif-samples/jolla.jpg",
    ]
    for index, relative in enumerate(tiles):
        image = photo(relative)
        # Fill a 4000x3000 tile, centre-cropped: each photo at 0.99-1.25 of its own size.
        scale = max(4000 / image.width, 3000 / image.height)
        size = (round(image.width * scale), round(image.height * scale))
        image = image.resize(size, Image.LANCZOS)
        left, top = (size[0] - 4000) // 2, (size[1] - 3000) // 2
        canvas.paste(image.crop((left, top, left + 4000, top + 3000)),
                     (index % 2 * 4000, index // 2 * 3000))
    canvas.save(os.path.join(work, "mosaic.ppm"))
if not os.path.exists(os.path.join(work, "sky.ppm")):
    # The mosaic under a sky: its upper 40% a smooth gradient, which holds few bytes, so
    # bands of equal height would not be of equal work.
    canvas = Image.open(os.path.join(work, "mosaic.ppm"))
    ramp = Image.linear_gradient("L").resize((8000, 2400))
    sky = Image.merge("RGB", (ramp.point(lambda v: 90 + v // 4),
                              ramp.point(lambda v: 140 + v // 5),
                              ramp.point(lambda v: 200 + v // 8)))
    canvas.paste(sky, (0, 0))
    canvas.save(os.path.join(work, "sky.ppm"))
EOF
  for name in largest mosaic sky; do
    [ -s "$work/$name-restart.jpg" ] ||
      cjpeg -quality 90 -restart 1 -outfile "$work/$name-restart.jpg" "$work/$name.ppm"
    [ -s "$work/$name-plain.jpg" ] ||
      cjpeg -quality 90 -outfile "$work/$name-plain.jpg" "$work/$name.ppm"
  done
}

# One timed run: prints "milliseconds kilobytes".
timed() {
  local start end rss
  start=$(date +%s%N)
  rss=$(/usr/bin/time -f %M "$@" 2>&1 > /dev/null | tail -n 1)
  end=$(date +%s%N)
  echo "$(((end - start) / 1000000)) $rss"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

make_pictures
echo "| picture | thumbd ms | vipsthumbnail ms | thumbd / vips | thumbd peak RSS MiB | vips peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|"
for name in largest mosaic sky; do
  for kind in restart plain; do
    file=$work/$name-$kind.jpg
    ours=$work/out/ours.tsv
    theirs=$work/out/theirs.tsv
    : > "$ours"
    : > "$theirs"
    for run in $(seq 0 "$runs"); do
      a=$(timed "$thumbd" thumbnail "$file" --size 256x256 --quiet --output "$work/out/ours.jpg")
      b=$(timed vipsthumbnail "$file" -s 256x256 -o "$work/out/%s.jpg[Q=85]")
      # Run 0 warms the page cache and both binaries.
      [ "$run" -eq 0 ] && continue
      echo "$a" >> "$ours"
      echo "$b" >> "$theirs"
    done
    t_ours=$(cut -d' ' -f1 "$ours" | median)
    t_theirs=$(cut -d' ' -f1 "$theirs" | median)
    m_ours=$(cut -d' ' -f2 "$ours" | median)
    m_theirs=$(cut -d' ' -f2 "$theirs" | median)
    awk -v n="$name ($kind)" -v a="$t_ours" -v b="$t_theirs" -v ma="$m_ours" -v mb="$m_theirs" \
      'BEGIN { printf "| %s | %.0f | %.0f | %.2f | %.1f | %.1f |\n", n, a, b, a / b, ma / 1024, mb / 1024 }'
  done
done
