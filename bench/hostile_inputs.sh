#!/usr/bin/env bash
# Issue 17's hostile inputs through `thumbd thumbnail` at default limits: wall time, CPU and
# peak RSS per input, for this build and optionally an older one, side by side.
#
# Usage: bench/hostile_inputs.sh [OLD_THUMBD]
#   Inputs: Tests/ImagePipelineTests/Fixtures/hostile plus the big ones made by
#   bench/make_hostile_inputs.py. Each run is cut off after 120 s.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
old=${1:-}
swift build -c release --product thumbd >&2
new=.build/release/thumbd
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fixtures=Tests/ImagePipelineTests/Fixtures/hostile
python3 bench/make_hostile_inputs.py "$work" "$fixtures/flat_huff.jpg" "$fixtures/flat_arith.jpg" \
  "${THUMBD_CORPUS:-../shared/corpus}/photo/coil/normal.jpg"
cp "$fixtures"/* "$work/"

measure() {  # binary input -> "wall cpu rss_mib outcome"
  local out
  out=$( { /usr/bin/time -f "TIME %e %U %S %M" timeout 120 "$1" thumbnail "$2" --size 256x256 \
           -o "$work/out/" >/dev/null; } 2>&1 || true)
  local t kind
  t=$(grep '^TIME' <<<"$out" | tail -n 1)
  kind=$(grep -o ': [a-z_]*: ' <<<"$out" | head -n 1 | tr -d ': ')
  [ -n "$kind" ] || kind=$(grep -q 'Command terminated by signal\|status 124' <<<"$out" && echo "killed" || echo "ok")
  awk -v k="$kind" '{ printf "%6.2f s %6.2f s %7.0f MiB  %s", $2, $3 + $4, $5 / 1024, k }' <<<"$t"
}

printf '%-26s | %-40s | %s\n' input "this build: wall, CPU, peak RSS, outcome" "${old:+old build}"
for input in "$work"/*.{png,jpg}; do
  name=$(basename "$input")
  line=$(measure "$new" "$input")
  if [ -n "$old" ]; then
    printf '%-26s | %-40s | %s\n' "$name" "$line" "$(measure "$old" "$input")"
  else
    printf '%-26s | %s\n' "$name" "$line"
  fi
done
