#!/usr/bin/env bash
# The routing figures of docs/PERFORMANCE.md ("Routing"), each on one
# sluice proxy (one worker, alone on CPU 1) in front of `sluice serve
# static` backends (on CPU 0, with the load):
#
# 1. split: a route with two backends weighted 90 and 10, N requests
#    (10,000); the share each upstream answered, read from the proxy's
#    `sluice_upstream_response_seconds_count{upstream}`.
# 2. mirror: the same fixed-rate load (RATE req/s for DURATION) on a route
#    without a mirror and on one that mirrors every request to a backend
#    taking 200 ms per answer; the client's p50/p99 of each, alternated
#    over ROUNDS rounds (medians).
# 3. table: CPU per request of the proxy with 10 routes and with 1,000
#    routes (each with a header and a regex condition), the request
#    matching the last rule added; closed-model load, ROUNDS rounds each
#    alternated, medians of the proxy's CPU µs per request.
#
#   bench/routing-figures.sh
#   ONLY="split" bench/routing-figures.sh
#   RATE=2000 DURATION=10s ROUNDS=3 bench/routing-figures.sh
#
# Needs: taskset, curl, a release build.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
RATE=${RATE:-2000}
N=${N:-10000}
ONLY=${ONLY:-split mirror table}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/results/routing-figures}
SLUICE=${SLUICE:-$ROOT/target/release/sluice}
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

proxy_bench_setup taskset curl

# A free TCP port on loopback.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

BACKEND_PIDS=()
# backend PORT [DELAY]: a `sluice serve static` on OTHER_CPU, 1 KB answers.
backend() {
  $OTHER_CPU "$SLUICE" serve static --listen "127.0.0.1:$1" --workers 1 --delay "${2:-0s}" \
    >"$WORK/serve-$1.log" 2>&1 &
  BACKEND_PIDS+=($!)
  wait_port "$1"
}
stop_backends() { kill "${BACKEND_PIDS[@]}" 2>/dev/null || true; wait "${BACKEND_PIDS[@]}" 2>/dev/null || true; BACKEND_PIDS=(); }
trap 'stop_backends; proxy_bench_cleanup' EXIT

# proxy CONFIG: starts sluice on PROXY_CPU with that configuration file.
proxy() {
  $PROXY_CPU "$SLUICE" proxy --config "$1" >"$WORK/proxy.log" 2>&1 &
  PROXY_PID=$!
  wait_port "$PROXY_PORT"
  wait_port "$ADMIN_PORT"
}

PROXY_PORT=$(free_port)
ADMIN_PORT=$(free_port)
A_PORT=$(free_port)
B_PORT=$(free_port)
SLOW_PORT=$(free_port)
backend "$A_PORT"
backend "$B_PORT"
backend "$SLOW_PORT" 200ms

head_config() {
  cat <<YAML
workers: 1
listeners:
  - address: 127.0.0.1:$PROXY_PORT
admin:
  address: 127.0.0.1:$ADMIN_PORT
upstreams:
  a: { hosts: ["http://127.0.0.1:$A_PORT"] }
  b: { hosts: ["http://127.0.0.1:$B_PORT"] }
  slow: { hosts: ["http://127.0.0.1:$SLOW_PORT"], timeouts: { request: 5s } }
YAML
}

# answered UPSTREAM: the proxy's count of answers from UPSTREAM.
answered() {
  curl -fsS "http://127.0.0.1:$ADMIN_PORT/metrics" |
    awk -v u="$1" '$1 ~ "^sluice_upstream_response_seconds_count" && $1 ~ "upstream=\"" u "\"" {print $2}'
}

if [[ " $ONLY " == *" split "* ]]; then
  { head_config; echo "routes:"; echo "  - { path: /, backends: [{ upstream: a, weight: 90 }, { upstream: b, weight: 10 }] }"; } >"$WORK/split.yaml"
  proxy "$WORK/split.yaml"
  $OTHER_CPU "$SLUICE" load -q -c 10 -n "$N" "http://127.0.0.1:$PROXY_PORT/" >"$OUT/split-load.txt"
  a=$(answered a); b=$(answered b)
  stop_proxy
  awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN {
    printf "split 90/10 over %d requests: a %d (%.2f%%), b %d (%.2f%%), off by %.2f points\n",
      n, a, 100*a/(a+b), b, 100*b/(a+b), 100*a/(a+b) - 90 }' | tee "$OUT/split.txt"
fi

if [[ " $ONLY " == *" mirror "* ]]; then
  {
    head_config
    echo "routes:"
    echo "  - { path: /plain, upstream: a }"
    echo "  - { path: /mirrored, upstream: a, mirror: [{ upstream: slow, max_in_flight: 1024 }] }"
  } >"$WORK/mirror.yaml"
  proxy "$WORK/mirror.yaml"
  : >"$OUT/mirror-rounds.txt"
  for round in $(seq "$ROUNDS"); do
    for path in plain mirrored; do
      $OTHER_CPU "$SLUICE" load -q -c 50 -R "$RATE" -d "$DURATION" --warmup 2s \
        --json "$WORK/$path.json" "http://127.0.0.1:$PROXY_PORT/$path" >/dev/null
      python3 - "$WORK/$path.json" "$path" "$round" >>"$OUT/mirror-rounds.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
at = {p["percentile"]: p["value_us"] for p in r["latency"]["percentiles"]}
errors = sum(r["errors"].values()) + r["non_2xx_3xx"]
print(sys.argv[3], sys.argv[2], r["requests"], errors, at[50.0], at[99.0])
PY
    done
  done
  curl -fsS "http://127.0.0.1:$ADMIN_PORT/metrics" | grep '^sluice_mirror_requests_total' >"$OUT/mirror-counts.txt" || true
  stop_proxy
  for path in plain mirrored; do
    p50=$(awk -v p="$path" '$2==p {print $5}' "$OUT/mirror-rounds.txt" | median)
    p99=$(awk -v p="$path" '$2==p {print $6}' "$OUT/mirror-rounds.txt" | median)
    echo "$path $p50 $p99"
  done >"$WORK/mirror-medians.txt"
  awk -v rate="$RATE" '{p50[$1]=$2; p99[$1]=$3} END {
    printf "mirror 100%% to a 200 ms backend, %s: p50 %.0f -> %.0f us, p99 %.0f -> %.0f us (%.2fx)\n",
      rate " req/s", p50["plain"], p50["mirrored"], p99["plain"], p99["mirrored"], p99["mirrored"]/p99["plain"] }' \
    "$WORK/mirror-medians.txt" | tee "$OUT/mirror.txt"
  cat "$OUT/mirror-counts.txt"
fi

# table_config N: N routes, each on its own path with a header and a regex
# condition; the load asks for the last one.
table_config() {
  head_config
  echo "routes:"
  for i in $(seq "$1"); do
    echo "  - { path: \"/r$i/\", headers: [{ name: x-tenant, regex: \"t$i-[a-z]+\" }, { name: x-plan, value: gold }], upstream: a }"
  done
}

if [[ " $ONLY " == *" table "* ]]; then
  table_config 10 >"$WORK/table-10.yaml"
  table_config 1000 >"$WORK/table-1000.yaml"
  : >"$OUT/table-rounds.txt"
  for round in $(seq "$ROUNDS"); do
    for n in 10 1000; do
      proxy "$WORK/table-$n.yaml"
      # Warm-up, then the measured run with the proxy's CPU ticks around it.
      $OTHER_CPU "$SLUICE" load -q -c 32 -d 2s -H "x-tenant: t$n-abc" -H "x-plan: gold" \
        "http://127.0.0.1:$PROXY_PORT/r$n/x" >/dev/null
      before=$(cpu_ticks "$PROXY_PID")
      $OTHER_CPU "$SLUICE" load -q -c 32 -d "$DURATION" -H "x-tenant: t$n-abc" -H "x-plan: gold" \
        --json "$WORK/table.json" "http://127.0.0.1:$PROXY_PORT/r$n/x" >/dev/null
      after=$(cpu_ticks "$PROXY_PID")
      stop_proxy
      python3 - "$WORK/table.json" "$n" "$round" "$before" "$after" "$(getconf CLK_TCK)" >>"$OUT/table-rounds.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n, rnd, before, after, hz = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
ok = r["requests"]
print(rnd, n, ok, (after - before) / hz * 1e6 / ok)
PY
    done
  done
  for n in 10 1000; do
    echo "$n $(awk -v n="$n" '$2==n {print $4}' "$OUT/table-rounds.txt" | median)"
  done >"$WORK/table-medians.txt"
  awk '{us[$1]=$2} END {
    printf "route table: 10 rules %.2f us/req, 1,000 rules %.2f us/req of proxy CPU: %+.2f us\n",
      us[10], us[1000], us[1000]-us[10] }' "$WORK/table-medians.txt" | tee "$OUT/table.txt"
fi
