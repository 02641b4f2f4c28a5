#!/usr/bin/env bash
# Brings up N thumbd instances and nginx on loopback with Config/nginx/thumbd-cluster.conf
# (paths rewritten into a working directory), and takes them down again.
#
#   bench/cluster.sh up DIR [N] [PORT]   start N instances (default 3) and nginx on PORT (8080)
#   bench/cluster.sh down DIR            stop everything started in DIR
#   bench/cluster.sh kill DIR I          SIGKILL instance I (1-based), as a crash would
#   bench/cluster.sh start DIR I         start instance I again (same socket and cache)
#   bench/cluster.sh try [N]             up in a temporary directory, wait for Ctrl-C, down
#
# THUMBD_BIN picks the binary (default: a release build, built if needed); THUMBD_ARGS adds
# flags to every instance (e.g. --allow-private for an origin on loopback). Needs nginx
# (apt-get install nginx-light).
set -euo pipefail
command -v nginx >/dev/null || PATH="$PATH:/usr/sbin"
repo=$(cd "$(dirname "$0")/.." && pwd)

binary() {
  if [ -n "${THUMBD_BIN:-}" ]; then echo "$THUMBD_BIN"; return; fi
  (cd "$repo" && swift build -c release --product thumbd >&2)
  echo "$repo/.build/release/thumbd"
}

start_instance() {
  local dir=$1 i=$2 bin
  bin=$(cat "$dir/binary")
  rm -f "$dir/thumbd-$i.pid"
  # shellcheck disable=SC2086
  "$bin" serve --socket "$dir/thumbd-$i.sock" --cache-dir "$dir/cache-$i" \
    ${THUMBD_ARGS:-} 2>>"$dir/thumbd-$i.log" &
  echo $! >"$dir/thumbd-$i.pid"
  for _ in $(seq 200); do
    if curl -sf --unix-socket "$dir/thumbd-$i.sock" http://t/healthz >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.05
  done
  echo "cluster: instance $i did not come up; see $dir/thumbd-$i.log" >&2
  return 1
}

up() {
  local dir=$1 count=${2:-3} port=${3:-8080}
  mkdir -p "$dir/nginx-cache" "$dir/nginx-tmp"
  dir=$(cd "$dir" && pwd)
  binary >"$dir/binary"
  echo "$count" >"$dir/count"
  for i in $(seq "$count"); do start_instance "$dir" "$i"; done
  # The shipped cluster config with this directory's sockets, cache and port, and exactly
  # $count server lines.
  local servers=""
  for i in $(seq "$count"); do
    servers+="    server unix:$dir/thumbd-$i.sock max_fails=1 fail_timeout=2s;\n"
  done
  awk -v servers="$servers" '
    /server unix:\/run\/thumbd\/thumbd-1.sock/ { printf "%s", servers; next }
    /server unix:\/run\/thumbd\/thumbd-[0-9]+.sock/ { next }
    { print }' "$repo/Config/nginx/thumbd-cluster.conf" |
    sed -e "s|/var/cache/nginx/thumbd|$dir/nginx-cache|" \
      -e "s|listen 127.0.0.1:8080;|listen 127.0.0.1:$port;|" >"$dir/thumbd-cluster.conf"
  local user=""
  if [ "$(id -u)" = 0 ]; then user="user root root;"; fi
  cat >"$dir/nginx.conf" <<CONF
$user
worker_processes 2;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log warn;
events { worker_connections 2048; }
http {
  access_log off;
  client_body_temp_path $dir/nginx-tmp; proxy_temp_path $dir/nginx-tmp;
  fastcgi_temp_path $dir/nginx-tmp; uwsgi_temp_path $dir/nginx-tmp; scgi_temp_path $dir/nginx-tmp;
  include $dir/thumbd-cluster.conf;
}
CONF
  nginx -t -q -c "$dir/nginx.conf" -p "$dir"
  nginx -c "$dir/nginx.conf" -p "$dir"
  for _ in $(seq 100); do
    if curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
      echo "cluster: $count instances behind http://127.0.0.1:$port/v1/thumbnail ($dir)"
      return 0
    fi
    sleep 0.05
  done
  echo "cluster: nginx did not come up; see $dir/nginx-error.log" >&2
  return 1
}

down() {
  local dir=$1
  if [ -f "$dir/nginx.pid" ]; then
    nginx -c "$dir/nginx.conf" -p "$dir" -s quit 2>/dev/null || kill "$(cat "$dir/nginx.pid")" 2>/dev/null || true
  fi
  for pidfile in "$dir"/thumbd-*.pid; do
    [ -f "$pidfile" ] || continue
    kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  done
  # Anything of this directory still running (a failed start leaves no pid file).
  pkill -TERM -f "serve --socket $dir/thumbd-" 2>/dev/null || true
  for _ in $(seq 100); do
    [ -f "$dir/nginx.pid" ] || break
    sleep 0.05
  done
}

case "${1:-}" in
  up) up "$2" "${3:-3}" "${4:-8080}" || { down "$2"; exit 1; } ;;
  down) down "$2" ;;
  kill) kill -KILL "$(cat "$2/thumbd-$3.pid")"; rm -f "$2/thumbd-$3.pid" ;;
  start) start_instance "$(cd "$2" && pwd)" "$3" ;;
  try)
    dir=$(mktemp -d)
    trap 'down "$dir"; rm -rf "$dir"' EXIT
    up "$dir" "${2:-3}" 8080
    echo "try: curl 'http://127.0.0.1:8080/v1/thumbnail?url=https%3A%2F%2Fexample.com%2Fa.jpg&w=128' -D-"
    echo "Ctrl-C stops the cluster."
    while true; do sleep 3600; done
    ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
