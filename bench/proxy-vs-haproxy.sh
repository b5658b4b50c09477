#!/usr/bin/env bash
# sluice proxy against HAProxy and nginx as reverse proxies, in the same run.
#
# An nginx-light backend (one worker) answers GET /v1/pets with the petstore
# JSON. In turn sluice, HAProxy and nginx proxy to it, each with one worker
# thread and keep-alive to the backend, configured by this script. A fourth
# row, "nginx-stock", is nginx with a bare `proxy_pass` (HTTP/1.0 and a new
# upstream connection per request, nginx's default and the configuration
# behind seeds/000's peer table, docs/BENCH.md). Each is
# loaded with `wrk -t1 -c128 -d10s`, then pipeline.lua at depth 16; rounds
# alternate the three proxies; medians and ratios are printed, with p99
# (pipelined: from a `sluice load --pipeline 16` run after wrk's, since wrk
# reports no percentiles when pipelining),
# non-2xx/socket errors, proxy CPU per request, idle RSS and peak RSS.
#
#   bench/proxy-vs-haproxy.sh                     # 3 rounds of 10 s per cell
#   DURATION=5s ROUNDS=1 bench/proxy-vs-haproxy.sh
#
# Needs: wrk, nginx, haproxy (apt-get install -y wrk nginx-light haproxy),
# a release build. With 2+ CPUs each proxy runs alone on CPU 1; the backend
# and wrk share CPU 0 (the same for every proxy).
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-128}
DEPTH=${DEPTH:-16}
BACKEND_PORT=${BACKEND_PORT:-18090}
PROXY_PORT=${PROXY_PORT:-18091}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/proxy-vs-haproxy}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

proxy_bench_setup wrk nginx haproxy taskset
start_pets_backend
mkdir -p "$WORK/nginx-proxy" "$WORK/nginx-stock"

cat >"$WORK/sluice.yaml" <<YAML
workers: 1
listeners: [{ address: 127.0.0.1:$PROXY_PORT }]
upstreams:
  backend:
    hosts: ["http://127.0.0.1:$BACKEND_PORT"]
    pool: { max_idle: 1024 }
routes:
  - { path: /, upstream: backend }
log: { level: warn }
YAML

cat >"$WORK/haproxy.cfg" <<CFG
global
  nbthread 1
  maxconn 8000
defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout server 10s
  http-reuse always
frontend front
  bind 127.0.0.1:$PROXY_PORT
  default_backend back
backend back
  server b1 127.0.0.1:$BACKEND_PORT
CFG

cat >"$WORK/nginx-proxy/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
error_log $WORK/nginx-proxy/error.log warn;
pid $WORK/nginx-proxy/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 256; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$PROXY_PORT backlog=8192;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX

cat >"$WORK/nginx-stock/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
error_log $WORK/nginx-stock/error.log warn;
pid $WORK/nginx-stock/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$PROXY_PORT backlog=8192;
    location / { proxy_pass http://127.0.0.1:$BACKEND_PORT; }
  }
}
NGINX

# start_proxy NAME: starts it on CPU 1; sets PROXY_PID to the process doing the work.
start_proxy() {
  case $1 in
    sluice) $PROXY_CPU "$SLUICE" proxy -c "$WORK/sluice.yaml" >/dev/null 2>"$WORK/sluice.log" & PROXY_PID=$! ;;
    haproxy) $PROXY_CPU haproxy -db -f "$WORK/haproxy.cfg" >/dev/null 2>"$WORK/haproxy.log" & PROXY_PID=$! ;;
    nginx) $PROXY_CPU nginx -c "$WORK/nginx-proxy/nginx.conf" -p "$WORK/nginx-proxy" & PROXY_PID=$! ;;
    nginx-stock) $PROXY_CPU nginx -c "$WORK/nginx-stock/nginx.conf" -p "$WORK/nginx-stock" & PROXY_PID=$! ;;
  esac
  wait_port "$PROXY_PORT"
  WORKER_PID=$PROXY_PID
  [[ $1 == nginx* ]] && WORKER_PID=$(pgrep -P "$PROXY_PID" | head -1)
  sleep 0.3
}

# run_wrk MODE -> "requests/s p99 errors cpu-us-per-request"
run_wrk() {
  local mode=$1 out before after started ended
  before=$(cpu_ticks "$WORKER_PID"); started=$(date +%s.%N)
  if [[ $mode == pipelined ]]; then
    out=$($OTHER_CPU wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$PROXY_PORT" -s "$ROOT/bench/pipeline.lua" --latency -- /v1/pets "$DEPTH")
  else
    out=$($OTHER_CPU wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$PROXY_PORT/v1/pets" --latency)
  fi
  ended=$(date +%s.%N); after=$(cpu_ticks "$WORKER_PID")
  echo "$out" >>"$OUT/wrk.log"
  local rps p99 errors cost
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  if [[ $mode == pipelined ]]; then
    # wrk reports no latency percentiles when pipelining; sluice load times each request.
    p99=$($OTHER_CPU "$SLUICE" load -q -t1 -c"$CONNS" -d"$DURATION" --pipeline "$DEPTH" -H 'J-Tenant-Id: 1007' "http://127.0.0.1:$PROXY_PORT/v1/pets" | tee -a "$OUT/wrk.log" | awk '$1=="99%" {print $2}')
  fi
  errors=$(awk '/Non-2xx/ {n+=$NF} /Socket errors/ {gsub(",",""); n+=$4+$6+$8+$10} END {print n+0}' <<<"$out")
  cost=$(awk -v t=$((after - before)) -v r="$rps" -v s="$started" -v e="$ended" 'BEGIN {printf "%.2f", t * 10000 / (r * (e - s))}')
  echo "$rps $p99 $errors $cost"
}

PROXIES=(sluice haproxy nginx nginx-stock)
: >"$OUT/wrk.log"
for p in "${PROXIES[@]}"; do for m in plain pipelined; do : >"$WORK/$p.$m"; done; : >"$WORK/$p.rss"; done

for round in $(seq 0 "$ROUNDS"); do
  for p in "${PROXIES[@]}"; do
    start_proxy "$p"
    idle=$(rss_kib "$WORKER_PID" VmRSS)
    for mode in plain pipelined; do
      read -r rps p99 errors cost < <(run_wrk "$mode")
      if (( round == 0 )); then continue; fi # warm-up round, discarded
      echo "round $round $p $mode: $rps req/s, p99 $p99, errors $errors, $cost us CPU/req" >&2
      echo "$rps $p99 $errors $cost" >>"$WORK/$p.$mode"
    done
    (( round == 0 )) || echo "$idle $(rss_kib "$WORKER_PID" VmHWM)" >>"$WORK/$p.rss"
    stop_proxy
  done
done

TABLE="$OUT/table.md"
{
  echo "| mode | proxy | req/s (median) | vs HAProxy | vs nginx | vs nginx-stock | p99 (median) | errors | CPU us/req | idle RSS KiB | peak RSS KiB |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for mode in plain pipelined; do
    h=$(cut -d' ' -f1 "$WORK/haproxy.$mode" | median); n=$(cut -d' ' -f1 "$WORK/nginx.$mode" | median)
    ns=$(cut -d' ' -f1 "$WORK/nginx-stock.$mode" | median)
    for p in "${PROXIES[@]}"; do
      r=$(cut -d' ' -f1 "$WORK/$p.$mode" | median)
      p99=$(cut -d' ' -f2 "$WORK/$p.$mode" | to_us | median)
      errs=$(awk '{n+=$3} END {print n}' "$WORK/$p.$mode")
      cost=$(cut -d' ' -f4 "$WORK/$p.$mode" | median)
      idle=$(cut -d' ' -f1 "$WORK/$p.rss" | median); peak=$(cut -d' ' -f2 "$WORK/$p.rss" | sort -g | tail -1)
      printf '| %s | %s | %.0f | %.2fx | %.2fx | %.2fx | %.0f us | %s | %s | %s | %s |\n' "$mode" "$p" "$r" \
        "$(awk -v a="$r" -v b="$h" 'BEGIN{print a/b}')" "$(awk -v a="$r" -v b="$n" 'BEGIN{print a/b}')" \
        "$(awk -v a="$r" -v b="$ns" 'BEGIN{print a/b}')" "$p99" "$errs" "$cost" "$idle" "$peak"
    done
  done
} >"$TABLE"
echo
echo "wrk -t1 -c$CONNS -d$DURATION (pipelined: pipeline.lua depth $DEPTH; its p99 from sluice load --pipeline $DEPTH); medians of $ROUNDS rounds after a warm-up; proxy on CPU 1, backend nginx and wrk on CPU 0"
cat "$TABLE"
