#!/usr/bin/env bash
# Memory per idle client connection: sluice proxy, HAProxy and nginx, in
# the same run, in front of the same nginx-light backend.
#
# For each proxy and each scenario, a fresh proxy process (one worker)
# takes CONNS client connections from bench/idle-conns.py. Each makes one
# request (GET /v1/pets) and then stays open and idle; the figure is the
# proxy's RSS rise (VmRSS, /proc/PID/status; nginx: its worker) divided by
# the number of connections. Scenarios:
#   h1    HTTP/1.1 keep-alive, one request each, then idle
#   h2    HTTP/2 with prior knowledge (h2c), one stream each, then idle
#   slow  a request head begun (two lines) and never finished (slowloris)
# Also printed: each proxy's RSS right after start (sluice: with the
# example configuration's shape, a listener and one upstream).
#
#   bench/idle-memory.sh                          # 1,000 and 10,000 connections
#   CONNS="2000" SCENARIOS="h1 h2" bench/idle-memory.sh
#   CONNS=8000 SCENARIOS=h1 BURST=1 HOLD=3 bench/idle-memory.sh   # after a burst
#
# Needs: nginx, haproxy (apt-get install -y nginx-light haproxy), python3,
# a release build. The open-file limit is raised to its hard maximum; each
# connection takes a descriptor in this script and one in the proxy.
set -euo pipefail

CONNS=${CONNS:-1000 10000}
SCENARIOS=${SCENARIOS:-h1 h2 slow}
PROXIES=${PROXIES:-sluice haproxy nginx}
# Seconds the connections sit idle before RSS is read (idle-conns.py --hold).
HOLD=${HOLD:-2}
# BURST=1: every connection opened first, then every request sent at once
# (idle-conns.py --burst): what a burst leaves behind, not one at a time.
BURST=${BURST:-0}
BACKEND_PORT=${BACKEND_PORT:-18190}
PROXY_PORT=${PROXY_PORT:-18191}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/idle-memory}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

proxy_bench_setup nginx haproxy python3 taskset
start_pets_backend
mkdir -p "$WORK/nginx-proxy"
# A proxy takes two descriptors per connection (client and its share of
# the upstream side); HAProxy refuses to start when maxconn needs more
# than the limit, so counts above what the limit allows are lowered.
TOP=$(( ($(ulimit -n) - 1000) / 2 ))
CONNS=$(for c in $CONNS; do (( c > TOP )) && { echo "$c connections lowered to $TOP: open-file limit $(ulimit -n)" >&2; c=$TOP; }; echo "$c"; done | tr '\n' ' ')
MAX=$(( $(tr ' ' '\n' <<<"$CONNS" | sort -g | tail -1) + 50 ))

# write_configs PROTO: each proxy's configuration, HTTP/1.1 or h2c clients.
write_configs() {
  local h2=$([[ $1 == h2 ]] && echo yes || echo no)
  cat >"$WORK/sluice.yaml" <<YAML
workers: 1
listeners: [{ address: 127.0.0.1:$PROXY_PORT, protocols: [$([[ $h2 == yes ]] && echo h2 || echo http1)] }]
upstreams:
  backend:
    hosts: ["http://127.0.0.1:$BACKEND_PORT"]
    pool: { max_idle: 256 }
routes:
  - { path: /, upstream: backend }
limits: { max_connections: $MAX, header_read_timeout: 60s }
log: { level: warn }
YAML
  cat >"$WORK/haproxy.cfg" <<CFG
global
  nbthread 1
  maxconn $MAX
defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout http-request 60s
  timeout http-keep-alive 60s
  timeout server 10s
  http-reuse always
frontend front
  bind 127.0.0.1:$PROXY_PORT$([[ $h2 == yes ]] && echo " proto h2")
  default_backend back
backend back
  server b1 127.0.0.1:$BACKEND_PORT
CFG
  cat >"$WORK/nginx-proxy/nginx.conf" <<NGINX
worker_processes 1;
worker_rlimit_nofile $((MAX * 2));
daemon off;
error_log $WORK/nginx-proxy/error.log warn;
pid $WORK/nginx-proxy/nginx.pid;
events { worker_connections $((MAX * 2)); }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  client_header_timeout 60s;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 256; }
  server {
    listen 127.0.0.1:$PROXY_PORT$([[ $h2 == yes ]] && echo " http2") backlog=8192;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
}

# start_proxy NAME: on CPU 1; sets PROXY_PID and WORKER_PID (nginx: its worker).
start_proxy() {
  case $1 in
    sluice) $PROXY_CPU "$SLUICE" proxy -c "$WORK/sluice.yaml" >/dev/null 2>"$WORK/sluice.log" & PROXY_PID=$! ;;
    haproxy) $PROXY_CPU haproxy -db -f "$WORK/haproxy.cfg" >/dev/null 2>"$WORK/haproxy.log" & PROXY_PID=$! ;;
    nginx) $PROXY_CPU nginx -c "$WORK/nginx-proxy/nginx.conf" -p "$WORK/nginx-proxy" & PROXY_PID=$! ;;
  esac
  wait_port "$PROXY_PORT"
  WORKER_PID=$PROXY_PID
  [[ $1 == nginx ]] && WORKER_PID=$(pgrep -P "$PROXY_PID" | head -1)
  sleep 0.3
}

echo "load average before: $(load_average)"
TABLE="$OUT/table.md"
{
  echo "| scenario | connections | proxy | RSS at start KiB | RSS idle KiB | per connection |"
  echo "|---|---:|---|---:|---:|---:|"
} >"$TABLE"
for scenario in $SCENARIOS; do
  write_configs "$([[ $scenario == h2 ]] && echo h2 || echo h1)"
  for conns in $CONNS; do
    for p in $PROXIES; do
      start_proxy "$p"
      flags=()
      [[ $scenario == h2 ]] && flags=(--h2)
      [[ $scenario == slow ]] && flags=(--slow)
      [[ $BURST == 1 ]] && flags+=(--burst)
      # One warm-up request so that the start figure includes the upstream connection.
      $OTHER_CPU python3 "$ROOT/bench/idle-conns.py" --port "$PROXY_PORT" --pid "$WORKER_PID" --conns 1 --path /v1/pets --hold 0 "${flags[@]}" >/dev/null
      start=$(rss_kib "$WORKER_PID" VmRSS)
      if ! line=$($OTHER_CPU python3 "$ROOT/bench/idle-conns.py" --port "$PROXY_PORT" --pid "$WORKER_PID" --conns "$conns" --path /v1/pets --hold "$HOLD" "${flags[@]}" 2>"$WORK/client.log"); then
        echo "$scenario $conns $p: failed: $(tail -1 "$WORK/client.log")" >&2
        printf '| %s | %s | %s | %s | - | failed |\n' "$scenario" "$conns" "$p" "$start" >>"$TABLE"
        stop_proxy
        continue
      fi
      read -r _ _ _ before _ after _ per <<<"$line"
      echo "$scenario $conns $p: $line" >&2
      printf '| %s | %s | %s | %s | %s | %s B |\n' "$scenario" "$conns" "$p" "$start" "$after" "$per" >>"$TABLE"
      stop_proxy
    done
  done
done
echo "load average after: $(load_average)"
echo
echo "RSS rise per idle connection (VmRSS after CONNS connections, each after one request, minus before), one worker each"
cat "$TABLE"
