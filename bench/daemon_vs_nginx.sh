#!/usr/bin/env bash
# Memory-hit thumbnails from thumbd against nginx serving the same bytes as a static file, with
# the same clients in the same run: wrk over TCP, bench/socketload.c over TCP and Unix
# sockets. Rounds alternate between the two servers so machine noise hits both alike.
#
#   bench/daemon_vs_nginx.sh                 # defaults below
#   ROUNDS=5 DURATION=10 CONNECTIONS=64 NGINX_WORKERS=1 LOG_LEVEL=info bench/daemon_vs_nginx.sh
#   THUMBD=/path/to/other/thumbd bench/daemon_vs_nginx.sh   # another build (no swift build)
#   SOURCES=256 bench/daemon_vs_nginx.sh     # wrk over 256 distinct sources (and nginx files)
#   BASELINE=/path/to/older/thumbd bench/daemon_vs_nginx.sh  # that build too, in every round
#
# With BASELINE, a second daemon of that build serves the same files and each round measures
# nginx, thumbd and the baseline back to back, the two builds taking turns going first: the
# last column, thumbd / baseline, compares them under the same noise (separate runs on this
# shared machine moved by 30%).
#
# The source is a file:// URL, so every memory hit includes the check that the file is
# unchanged: a stat made after the poll that saw the request arrive, one per file per pass of
# the event loop, shared by the pass's requests for it (pipelined ones behind the first of a
# read add at most two more).
# With SOURCES=N the requests rotate over N copies of the image, so concurrent requests seldom
# share a stat: the cost of one stat per request.
#
# Needs nginx and wrk (apt-get install nginx-light wrk) and gcc.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-../shared/corpus/photo/coil/normal.jpg}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
CONNECTIONS=${CONNECTIONS:-64}
NGINX_WORKERS=${NGINX_WORKERS:-auto}
SIZE=${SIZE:-256}
SOURCES=${SOURCES:-1}

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

THUMBD=${THUMBD:-}
if [ -z "$THUMBD" ]; then
  swift build -c release --product thumbd >&2
  THUMBD=.build/release/thumbd
fi
gcc -O2 -pthread bench/socketload.c -o "$work/socketload"
image=$(realpath "$IMAGE")
if [ "$SOURCES" -gt 1 ]; then
  mkdir -p "$work/files"
  for i in $(seq 0 $((SOURCES - 1))); do cp "$image" "$work/files/$i.jpg"; done
  image="$work/files/0.jpg"
fi

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
start_daemon() { # BINARY NAME PORT
  # One loopback client is the whole load: no limit per client (set through the environment,
  # which an older BASELINE binary ignores).
  THUMBD_CLIENT_MISS_RATE=0 "$1" serve --socket "$work/$2.sock" --listen "127.0.0.1:$3" \
    --cache-dir "" --file-root "$(dirname "$image")" --log-level "${LOG_LEVEL:-warn}" \
    2>"$work/$2.log" &
  pids+=($!)
  echo $! >"$work/$2.pid"
  for _ in $(seq 100); do [ -S "$work/$2.sock" ] && break; sleep 0.1; done
}
# Request logging off on both sides (nginx: access_log off); LOG_LEVEL=info turns thumbd's on.
thumbd_port=$(free_port)
start_daemon "$THUMBD" thumbd "$thumbd_port"
BASELINE=${BASELINE:-}
daemons=(thumbd)
if [ -n "$BASELINE" ]; then
  baseline_port=$(free_port)
  start_daemon "$BASELINE" baseline "$baseline_port"
  daemons+=(baseline)
fi
encoded=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote("file://"+sys.argv[1],safe=""))' "$image")
target="/v1/thumbnail?url=$encoded&w=$SIZE&h=$SIZE"
mkdir -p "$work/www"
curl -sf --unix-socket "$work/thumbd.sock" "http://thumbd$target" -o "$work/www/thumb.jpg"
[ -z "$BASELINE" ] || curl -sf --unix-socket "$work/baseline.sock" "http://thumbd$target" -o /dev/null
bytes=$(stat -c %s "$work/www/thumb.jpg")
if [ "$SOURCES" -gt 1 ]; then
  # Every source warm in memory, every nginx copy in place, and a wrk script rotating both.
  printf 'paths = {}\ni = 0\n' >"$work/rotate-thumbd.lua"
  printf 'paths = {}\ni = 0\n' >"$work/rotate-nginx.lua"
  for i in $(seq 0 $((SOURCES - 1))); do
    url=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote("file://"+sys.argv[1],safe=""))' "$work/files/$i.jpg")
    for d in "${daemons[@]}"; do
      curl -sf --unix-socket "$work/$d.sock" "http://thumbd/v1/thumbnail?url=$url&w=$SIZE&h=$SIZE" -o /dev/null
    done
    cp "$work/www/thumb.jpg" "$work/www/$i.jpg"
    echo "paths[$i] = \"/v1/thumbnail?url=$url&w=$SIZE&h=$SIZE\"" >>"$work/rotate-thumbd.lua"
    echo "paths[$i] = \"/$i.jpg\"" >>"$work/rotate-nginx.lua"
  done
  for side in thumbd nginx; do
    printf 'request = function()\n  i = (i + 1) %% %d\n  return wrk.format("GET", paths[i])\nend\n' \
      "$SOURCES" >>"$work/rotate-$side.lua"
  done
fi

nginx_port=$(free_port)
cat >"$work/nginx.conf" <<CONF
worker_processes $NGINX_WORKERS;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000000;
  sendfile on;
  tcp_nodelay on;
  open_file_cache max=16;
  default_type image/jpeg;
  client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
  server {
    listen 127.0.0.1:$nginx_port;
    listen unix:$work/nginx.sock;
    root $work/www;
  }
}
CONF
mkdir -p "$work/tmp"
nginx -c "$work/nginx.conf" -p "$work" -g 'daemon off;' 2>>"$work/nginx-error.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$work/nginx.sock" ] && break; sleep 0.1; done

wrk_rate() { wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" "$1" | awk '/Requests\/sec/ {print $2}'; }
load_rate() { "$work/socketload" "$1" "$2" "$CONNECTIONS" "$DURATION" | awk '{print $1}'; }

echo "thumbnail: $bytes bytes (${SIZE}x${SIZE} box of $(basename "$image")), $CONNECTIONS connections,"
echo "${DURATION}s per run, nginx worker_processes $NGINX_WORKERS, $(nproc) cores"
# One line per round and client: nginx's rate, thumbd's, thumbd / nginx, and with BASELINE
# the baseline's rate, baseline / nginx and thumbd / baseline.
#
# With BASELINE, each daemon's CPU time (utime + stime, /proc/PID/stat) over a run is divided by
# the requests it answered, and the line ends with the baseline's CPU per request over this
# build's (b/t cpu): under load the rate follows the CPU a request costs, and this figure moves
# far less than the rates when other tenants take the machine's cores. The summary at the end
# gives the median of both ratios per client.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$(cat "$work/$1.pid")/stat"; }
# timed NAME FUNCTION ARGS...: the function's rate, and the daemon NAME's CPU µs per request
# into $work/cpu-NAME.
timed() {
  local name=$1 before rate after
  shift
  before=$(cpu_ticks "$name")
  rate=$("$@")
  after=$(cpu_ticks "$name")
  echo "($after - $before) * 1000000 / $(getconf CLK_TCK) / ($rate * $DURATION)" | bc -l >"$work/cpu-$name"
  echo "$rate"
}
report() { # ROUND CLIENT NGINX THUMBD [BASELINE]
  if [ $# -eq 5 ]; then
    local tc bc
    tc=$(cat "$work/cpu-thumbd")
    bc=$(cat "$work/cpu-baseline")
    printf '%-6s %-24s %10s %10s %6.2f %10s %6.2f %6.2f %8.2f %8.2f %6.2f\n' "$1" "$2" "$3" "$4" \
      "$(echo "$4 / $3" | bc -l)" "$5" "$(echo "$5 / $3" | bc -l)" "$(echo "$4 / $5" | bc -l)" \
      "$tc" "$bc" "$(echo "$bc / $tc" | bc -l)" | tee -a "$work/rounds"
  else
    printf '%-6s %-24s %10s %10s %6.2f\n' "$1" "$2" "$3" "$4" "$(echo "$4 / $3" | bc -l)"
  fi
}
if [ -n "$BASELINE" ]; then
  printf '%-6s %-24s %10s %10s %6s %10s %6s %6s %8s %8s %6s\n' round client nginx thumbd ratio \
    baseline ratio t/b "t us/req" "b us/req" "b/t cpu"
else
  printf '%-6s %-24s %10s %10s %6s\n' round client nginx thumbd ratio
fi
if [ "$SOURCES" -gt 1 ]; then
  echo "$SOURCES distinct sources, requests rotating over them (wrk only)"
  rotating() { wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -s "$work/rotate-$1.lua" "http://127.0.0.1:$2/" | awk '/Requests\/sec/ {print $2}'; }
  for round in $(seq "$ROUNDS"); do
    n=$(rotating nginx "$nginx_port")
    if [ -z "$BASELINE" ]; then
      report "$round" "wrk tcp, rotating" "$n" "$(rotating thumbd "$thumbd_port")"
    elif [ $((round % 2)) -eq 1 ]; then # the two builds take turns going first
      t=$(timed thumbd rotating thumbd "$thumbd_port")
      b=$(timed baseline rotating thumbd "$baseline_port")
      report "$round" "wrk tcp, rotating" "$n" "$t" "$b"
    else
      b=$(timed baseline rotating thumbd "$baseline_port")
      t=$(timed thumbd rotating thumbd "$thumbd_port")
      report "$round" "wrk tcp, rotating" "$n" "$t" "$b"
    fi
  done
fi
# measure CLIENT-LABEL FUNCTION NGINX-TARGET THUMBD-TARGET BASELINE-TARGET: one report line,
# the two builds taking turns going first.
measure() {
  local n t b
  n=$($2 "$3")
  if [ -z "$BASELINE" ]; then
    report "$round" "$1" "$n" "$($2 "$4")"
  elif [ $((round % 2)) -eq 1 ]; then
    t=$(timed thumbd "$2" "$4"); b=$(timed baseline "$2" "$5"); report "$round" "$1" "$n" "$t" "$b"
  else
    b=$(timed baseline "$2" "$5"); t=$(timed thumbd "$2" "$4"); report "$round" "$1" "$n" "$t" "$b"
  fi
}
wrk_at() { wrk_rate "http://127.0.0.1:$1"; }
load_at() { load_rate "${1% *}" "${1#* }"; }
[ "$SOURCES" -gt 1 ] || for round in $(seq "$ROUNDS"); do
  measure "wrk tcp" wrk_at "$nginx_port/thumb.jpg" "$thumbd_port$target" "${baseline_port:-0}$target"
  measure "socketload tcp" load_at "tcp:127.0.0.1:$nginx_port /thumb.jpg" \
    "tcp:127.0.0.1:$thumbd_port $target" "tcp:127.0.0.1:${baseline_port:-0} $target"
  measure "socketload unix" load_at "unix:$work/nginx.sock /thumb.jpg" \
    "unix:$work/thumbd.sock $target" "unix:$work/baseline.sock $target"
done
if [ -n "$BASELINE" ]; then
  echo "medians over $ROUNDS rounds, this build against the baseline:"
  python3 - "$work/rounds" <<'SUMMARY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    fields = line.split()
    # round, client words..., then 9 numbers
    client = " ".join(fields[1:-9])
    rows.setdefault(client, []).append((float(fields[-4]), float(fields[-1])))
for client, values in rows.items():
    rate = statistics.median(v[0] for v in values)
    cpu = statistics.median(v[1] for v in values)
    print(f"  {client:<24} rate t/b {rate:.2f}   cpu per request b/t {cpu:.2f}")
SUMMARY
fi
