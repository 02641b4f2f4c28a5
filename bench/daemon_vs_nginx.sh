#!/usr/bin/env bash
# Memory-hit thumbnails from thumbd against nginx serving the same bytes as a static file, with
# the same clients in the same run: wrk over TCP, bench/socketload.c over TCP and Unix
# sockets. Rounds alternate between the two servers so machine noise hits both alike.
#
#   bench/daemon_vs_nginx.sh                 # defaults below
#   ROUNDS=5 DURATION=10 CONNECTIONS=64 NGINX_WORKERS=1 LOG_LEVEL=info bench/daemon_vs_nginx.sh
#   THUMBD=/path/to/other/thumbd bench/daemon_vs_nginx.sh   # another build (no swift build)
#   SOURCES=256 bench/daemon_vs_nginx.sh     # wrk over 256 distinct sources (and nginx files)
#
# The source is a file:// URL, so every memory hit includes the check that the file is
# unchanged: a stat made after the request arrived, one per file per pass of the event loop.
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
thumbd_port=$(free_port)
# Request logging off on both sides (nginx: access_log off); LOG_LEVEL=info turns thumbd's on.
"$THUMBD" serve --socket "$work/thumbd.sock" --listen "127.0.0.1:$thumbd_port" \
  --cache-dir "" --file-root "$(dirname "$image")" --log-level "${LOG_LEVEL:-warn}" \
  2>"$work/thumbd.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$work/thumbd.sock" ] && break; sleep 0.1; done
encoded=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote("file://"+sys.argv[1],safe=""))' "$image")
target="/v1/thumbnail?url=$encoded&w=$SIZE&h=$SIZE"
mkdir -p "$work/www"
curl -sf --unix-socket "$work/thumbd.sock" "http://thumbd$target" -o "$work/www/thumb.jpg"
bytes=$(stat -c %s "$work/www/thumb.jpg")
if [ "$SOURCES" -gt 1 ]; then
  # Every source warm in memory, every nginx copy in place, and a wrk script rotating both.
  printf 'paths = {}\ni = 0\n' >"$work/rotate-thumbd.lua"
  printf 'paths = {}\ni = 0\n' >"$work/rotate-nginx.lua"
  for i in $(seq 0 $((SOURCES - 1))); do
    url=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote("file://"+sys.argv[1],safe=""))' "$work/files/$i.jpg")
    curl -sf --unix-socket "$work/thumbd.sock" "http://thumbd/v1/thumbnail?url=$url&w=$SIZE&h=$SIZE" -o /dev/null
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
printf '%-6s %-24s %12s %12s %7s\n' round client nginx thumbd ratio
if [ "$SOURCES" -gt 1 ]; then
  echo "$SOURCES distinct sources, requests rotating over them (wrk only)"
  for round in $(seq "$ROUNDS"); do
    n=$(wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -s "$work/rotate-nginx.lua" "http://127.0.0.1:$nginx_port/" | awk '/Requests\/sec/ {print $2}')
    t=$(wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" -s "$work/rotate-thumbd.lua" "http://127.0.0.1:$thumbd_port/" | awk '/Requests\/sec/ {print $2}')
    printf '%-6s %-24s %12s %12s %7.2f\n' "$round" "wrk tcp, rotating" "$n" "$t" "$(echo "$t / $n" | bc -l)"
  done
  exit 0
fi
for round in $(seq "$ROUNDS"); do
  n=$(wrk_rate "http://127.0.0.1:$nginx_port/thumb.jpg"); t=$(wrk_rate "http://127.0.0.1:$thumbd_port$target")
  printf '%-6s %-24s %12s %12s %7.2f\n' "$round" "wrk tcp" "$n" "$t" "$(echo "$t / $n" | bc -l)"
  n=$(load_rate "tcp:127.0.0.1:$nginx_port" /thumb.jpg); t=$(load_rate "tcp:127.0.0.1:$thumbd_port" "$target")
  printf '%-6s %-24s %12s %12s %7.2f\n' "$round" "socketload tcp" "$n" "$t" "$(echo "$t / $n" | bc -l)"
  n=$(load_rate "unix:$work/nginx.sock" /thumb.jpg); t=$(load_rate "unix:$work/thumbd.sock" "$target")
  printf '%-6s %-24s %12s %12s %7.2f\n' "$round" "socketload unix" "$n" "$t" "$(echo "$t / $n" | bc -l)"
done
